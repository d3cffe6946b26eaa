FROM --platform=$BUILDPLATFORM alpine:3.20 AS fetch
ARG TARGETARCH
ARG TARGETVARIANT
RUN wget -O /kubectl https://dl.k8s.io/release/v1.30.0/bin/linux/${TARGETARCH}${TARGETVARIANT:+/$TARGETVARIANT}/kubectl

FROM registry.example.com/infra/images/base:${TARGETARCH:-amd64}${TARGETVARIANT:+-$TARGETVARIANT}
COPY --from=fetch /kubectl /usr/local/bin/kubectl
