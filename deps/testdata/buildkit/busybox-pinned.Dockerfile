ARG BUSYBOX_DIGEST=sha256:6d9ac9237a84afe1516540f40a0fafdc86859b2141954b4d643af7066d598b74
FROM quay.io/libpod/busybox${TARGETARCH:+@${BUSYBOX_DIGEST}} AS busybox
FROM registry.example.com/infra/images/base:2024.06
COPY --from=busybox /bin/busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s"]
