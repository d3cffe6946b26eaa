FROM scratch AS empty
FROM golang:1.22 AS build
RUN CGO_ENABLED=0 go build -o /app .
FROM scratch
COPY --from=scratch / /
COPY --from=build /app /app
COPY --from=empty / /
