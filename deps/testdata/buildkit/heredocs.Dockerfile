# syntax=docker/dockerfile:1.7
FROM debian:bookworm-slim AS base
RUN <<EOT bash
  set -e
  apt-get update
  apt-get install -y --no-install-recommends ca-certificates
EOT
COPY <<EOF /etc/app.conf
FROM not-a-dependency
COPY --from=neither / /
EOF
FROM base
COPY --from=registry.example.com/infra/images/tini:0.19 /tini /tini
