#!/usr/bin/env bash
# buildah-image.sh: a Debian minbase image with buildah and git, the job
# image of podman-executor's image-build tests (a job that runs `buildah
# build` and `buildah push` without privileged) and of the real chain
# (e2e/realchain_test.go, whose jobs clone their own sources).
#
#   .ci/buildah-image.sh     # needs the podman service of .ci/podman.sh
#
# debootstrap takes minutes, so the rootfs tarball is cached in
# $DEPSD_CACHE (default /var/cache/depsd-ci) under a name derived from its
# content (suite and packages): changing the list builds a new one. The
# image is imported when missing or made from another list. The mirror is this machine's own: the
# first URIs line of /etc/apt/sources.list.d/*.sources, else the first
# deb line of /etc/apt/sources.list*; without one the script stops.
#
# Environment: DEPSD_BUILDAH_IMAGE (default localhost/buildah-job-test:bookworm),
# CONTAINERS_CONF as printed by .ci/podman.sh start.
set -euo pipefail

IMAGE=${DEPSD_BUILDAH_IMAGE:-localhost/buildah-job-test:bookworm}
CACHE=${DEPSD_CACHE:-/var/cache/depsd-ci}
SUITE=bookworm
PACKAGES=buildah,fuse-overlayfs,containernetworking-plugins,ca-certificates,git
KEY=$(printf '%s\n' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-12)
TARBALL=$CACHE/buildah-$SUITE-$KEY.tar

log() { echo "buildah-image.sh: $*" >&2; }

# An image imported from another package list (an older script's) is
# replaced: the label names the tarball it came from.
if [[ $(podman image inspect --format '{{index .Labels "io.depsd.ci.key"}}' "$IMAGE" 2>/dev/null || true) == "$KEY" ]]; then
	exit 0
fi
mkdir -p "$CACHE"
if [[ ! -s $TARBALL ]]; then
	url=$("$(dirname "$0")/debian-mirror.sh" "$SUITE") # an assignment: a failure stops here
	root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
	log "debootstrap $SUITE with $PACKAGES from $url (a few minutes)"
	debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$url" >"$CACHE/debootstrap-buildah.log" 2>&1 ||
		{ tail -30 "$CACHE/debootstrap-buildah.log" >&2; rm -rf "$root"; exit 1; }
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
	tar -C "$root" -cf "$TARBALL.tmp" .
	mv "$TARBALL.tmp" "$TARBALL"
	rm -rf "$root"
fi
podman import -q --change 'CMD ["/bin/bash"]' --change "LABEL io.depsd.ci.key=$KEY" \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	"$TARBALL" "$IMAGE" >/dev/null
log "imported $IMAGE"
