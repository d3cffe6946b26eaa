ARG REGISTRY=registry.example.com
ARG BASE_TAG=2024.06
FROM ${REGISTRY}/infra/images/base:${BASE_TAG} AS base
ARG REGISTRY
ARG BASE_TAG=override-in-stage-does-not-change-from
FROM ${REGISTRY}/infra/images/base:${BASE_TAG}
ENV REGISTRY=${REGISTRY}
