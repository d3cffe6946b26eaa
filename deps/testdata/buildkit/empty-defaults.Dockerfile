ARG BASE_DEBIAN_DISTRO=bookworm
ARG GOLANG_IMAGE=golang:1.22-${BASE_DEBIAN_DISTRO}
ARG SUFFIX=
ARG DIGEST=""
ARG REG=registry.example.com/infra/images
FROM ${GOLANG_IMAGE} AS golang
FROM ${REG}/debian${SUFFIX}:${BASE_DEBIAN_DISTRO}${DIGEST:+@${DIGEST}} AS runtime
COPY --from=golang /usr/local/go /usr/local/go
ENV PATH=/usr/local/go/bin:$PATH GOFLAGS=""
