ARG RUST_VERSION=1.79
FROM --platform=$BUILDPLATFORM rust:${RUST_VERSION}-alpine AS chef
RUN cargo install cargo-chef
WORKDIR /app

FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS builder
ARG TARGETARCH
COPY --from=planner /app/recipe.json recipe.json
RUN cargo chef cook --release --recipe-path recipe.json
COPY . .
RUN cargo build --release --target ${TARGETARCH}-unknown-linux-musl

FROM scratch
COPY --from=builder /app/target/release/app /app
COPY --from=alpine:3.20 /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
ENTRYPOINT ["/app"]
