ARG DOCKER_ARCH=amd64
ARG DEBIAN_RELEASE=bookworm
FROM registry.example.com/infra/builders/go:1.22 AS builder
ARG TARGETOS TARGETARCH
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH go build -o /out/app ./cmd/app

FROM ${DOCKER_ARCH}/debian:${DEBIAN_RELEASE}-slim AS template
ONBUILD ARG TARGET=app
ONBUILD COPY --from=builder /out/${TARGET} /app
ENTRYPOINT ["/app"]

FROM template AS app
