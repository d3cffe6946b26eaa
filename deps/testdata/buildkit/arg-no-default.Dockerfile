ARG BASE_TAG
FROM registry.example.com/infra/images/base:1${BASE_TAG}
FROM alpine:3.20${BASE_TAG:+-$BASE_TAG}
