# syntax=docker/dockerfile:1
ARG BUILDKIT_SBOM_SCAN_CONTEXT=true
ARG NODE=22
FROM --platform=$BUILDPLATFORM node:${NODE}-alpine AS web
ARG BUILDKIT_SBOM_SCAN_STAGE=true
WORKDIR /web
COPY web/ .
RUN npm ci && npm run build

FROM --platform=$BUILDPLATFORM golang:1.23-alpine AS api
ARG TARGETOS
ARG TARGETARCH
ENV CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH
COPY . /src
RUN --mount=type=cache,target=/root/.cache/go-build cd /src && go build -o /api ./cmd/api

FROM gcr.io/distroless/static-debian12:nonroot@sha256:8dd8d3ca2cf283383304fd45a5c9c74d5f2cd9da8d3b077d720e264880077c65
COPY --from=web /web/dist /srv/web
COPY --from=api /api /api
USER nonroot
