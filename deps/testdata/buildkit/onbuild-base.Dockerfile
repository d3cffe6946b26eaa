FROM registry.example.com/infra/images/ruby:3.3 AS ruby-base
ONBUILD COPY --from=registry.example.com/infra/images/bundler-cache:3.3 /cache /usr/local/bundle
ONBUILD RUN --mount=type=bind,from=registry.example.com/tools/certs:1,target=/certs cp /certs/* /usr/local/share/ca-certificates/
FROM ruby-base AS app
COPY . /app
