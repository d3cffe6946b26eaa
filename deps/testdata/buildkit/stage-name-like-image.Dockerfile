FROM debian:bookworm AS debian
RUN apt-get update
FROM debian
FROM ubuntu
FROM ubuntu:24.04 AS ubuntu
