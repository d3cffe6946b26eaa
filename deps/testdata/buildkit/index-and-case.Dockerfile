FROM golang:1.22 As Builder
RUN go build -o /out/tool ./...
FROM alpine:3.20 as Runtime
FROM builder AS test
RUN go test ./...
FROM runtime
COPY --from=0 /out/tool /usr/bin/tool
COPY --from=TEST /etc/hosts /tmp/hosts
