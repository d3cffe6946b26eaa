ARG FLAVOR=${TARGETSTAGE}
FROM registry.example.com/infra/images/runtime:1 AS runtime
FROM registry.example.com/infra/images/${FLAVOR}-tools:1 AS tools
FROM runtime AS release
