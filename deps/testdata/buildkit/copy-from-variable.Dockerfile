ARG TOOLS=registry.example.com/tools/cli:2
FROM alpine:3.20
ARG TOOLS
COPY --from=${TOOLS} /cli /usr/bin/cli
