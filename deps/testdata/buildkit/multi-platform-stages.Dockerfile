ARG ALPINE=3.20
FROM alpine:${ALPINE} AS base-amd64
RUN apk add --no-cache intel-ucode
FROM registry.example.com/infra/images/alpine-arm:${ALPINE} AS base-arm64
FROM base-${TARGETARCH} AS base
RUN apk add --no-cache tzdata
FROM base AS final
ARG BUILDPLATFORM
LABEL built-on=$BUILDPLATFORM
