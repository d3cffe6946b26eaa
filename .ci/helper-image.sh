#!/usr/bin/env bash
# helper-image.sh: a Debian minbase image with git, for podman-executor's
# helper_image tests (sources cloned by a helper container, so the job
# image needs no git).
#
#   .ci/helper-image.sh     # needs the podman service of .ci/podman.sh
#
# debootstrap takes minutes, so the rootfs tarball is cached in
# $DEPSD_CACHE (default /var/cache/depsd-ci) and the image is only
# imported when missing. The mirror is the one this machine's apt uses for
# bookworm (.ci/debian-mirror.sh); with none, the script stops and says so.
#
# Environment: DEPSD_HELPER_IMAGE (default localhost/helper-git-test:bookworm),
# CONTAINERS_CONF as printed by .ci/podman.sh start.
set -euo pipefail

IMAGE=${DEPSD_HELPER_IMAGE:-localhost/helper-git-test:bookworm}
CACHE=${DEPSD_CACHE:-/var/cache/depsd-ci}
TARBALL=$CACHE/helper-git-bookworm.tar

log() { echo "helper-image.sh: $*" >&2; }

if podman image exists "$IMAGE"; then
	exit 0
fi
mkdir -p "$CACHE"
if [[ ! -s $TARBALL ]]; then
	mirror=$("$(dirname "$0")/debian-mirror.sh" bookworm) # an assignment: a failure stops here
	root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
	log "debootstrap bookworm from $mirror (a few minutes)"
	debootstrap --variant=minbase --include=git,ca-certificates bookworm "$root" "$mirror" >"$CACHE/debootstrap.log" 2>&1 ||
		{ tail -30 "$CACHE/debootstrap.log" >&2; rm -rf "$root"; exit 1; }
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
	tar -C "$root" -cf "$TARBALL.tmp" .
	mv "$TARBALL.tmp" "$TARBALL"
	rm -rf "$root"
fi
podman import -q --change 'CMD ["/bin/bash"]' \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	"$TARBALL" "$IMAGE" >/dev/null
log "imported $IMAGE"
