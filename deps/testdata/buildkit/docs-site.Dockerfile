FROM registry.example.com/tools/hugo:0.128 AS build
WORKDIR /site
COPY . .
RUN hugo --minify

FROM nginxinc/nginx-unprivileged:1.27-alpine
COPY --from=build /site/public /usr/share/nginx/html
COPY nginx.conf /etc/nginx/conf.d/default.conf
