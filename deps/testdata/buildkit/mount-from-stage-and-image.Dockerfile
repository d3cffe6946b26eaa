FROM golang:1.22 AS gomod
COPY go.mod go.sum ./
RUN go mod download
FROM golang:1.22
RUN --mount=type=bind,from=gomod,source=/go/pkg/mod,target=/go/pkg/mod \
    --mount=type=bind,from=registry.example.com/tools/protoc:25,source=/usr/bin/protoc,target=/usr/bin/protoc \
    --mount=type=cache,target=/root/.cache/go-build \
    --mount=type=secret,id=netrc,target=/root/.netrc \
    go generate ./... && go build ./...
