# syntax=docker/dockerfile:1
ARG GO_VERSION=1.22
ARG ALPINE_VERSION=3.20
ARG XX_VERSION=1.4.0

FROM --platform=$BUILDPLATFORM tonistiigi/xx:${XX_VERSION} AS xx

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-alpine${ALPINE_VERSION} AS golatest
FROM golatest AS gobase
COPY --from=xx / /
RUN apk add --no-cache file git
ENV GOFLAGS=-mod=vendor
ENV CGO_ENABLED=0
WORKDIR /src

FROM gobase AS build
ARG TARGETPLATFORM
ARG VERSION
ENV PATH=/go/bin:$PATH
RUN --mount=type=bind,target=. \
    --mount=type=cache,target=/root/.cache \
    --mount=type=cache,target=/go/pkg/mod \
    xx-go build -ldflags "-X main.version=${VERSION}" -o /usr/bin/app ./cmd/app && \
    xx-verify --static /usr/bin/app

FROM scratch AS binaries-unix
COPY --from=build /usr/bin/app /
FROM binaries-unix AS binaries-linux
FROM binaries-unix AS binaries-darwin
FROM scratch AS binaries-windows
COPY --from=build /usr/bin/app /app.exe
FROM binaries-$TARGETOS AS binaries

FROM alpine:${ALPINE_VERSION} AS release
RUN apk add --no-cache ca-certificates
COPY --from=binaries /app /usr/bin/app
ENTRYPOINT ["app"]
