#!/usr/bin/env bash
# podman.sh: a podman API service for tests, CI and developers.
#
#   eval "$(.ci/podman.sh start)"   # prints export lines; idempotent
#   .ci/podman.sh stop              # stops the service, removes test containers, networks, volumes
#   eval "$(.ci/podman.sh rootless-start)"  # as root: a rootless service too
#   .ci/podman.sh rootless-stop
#
# rootless-start creates the unprivileged user $DEPSD_ROOTLESS_USER
# (default podexec-ci) with subuid/subgid ranges, an XDG_RUNTIME_DIR, a
# containers.conf for rootless (runc, cgroupfs: no systemd here), starts
# `podman system service` as that user, loads the busybox test image into
# its store, and prints DEPSD_ROOTLESS_HOST / DEPSD_ROOTLESS_USER. Needs
# uidmap (newuidmap) and, for anything but host networking, slirp4netns
# with /dev/net/tun (made usable by the user when it is there).
#
# start writes a containers.conf that works on these machines (runc, since
# crun fails on their cgroup setup; ulimits lowered to the host's hard limit), starts `podman system service` on a socket
# in the state dir, waits until it answers, and imports a busybox test image
# built from the busybox-static package. Nothing is installed here: .ci/run
# installs `podman runc busybox-static`.
#
# Environment: DEPSD_PODMAN_STATE (state dir, default /tmp/depsd-ci/podman),
# DEPSD_TEST_IMAGE (default localhost/busybox-test:latest).
set -euo pipefail

STATE=${DEPSD_PODMAN_STATE:-/tmp/depsd-ci/podman}
IMAGE=${DEPSD_TEST_IMAGE:-localhost/busybox-test:latest}
CONF=$STATE/containers.conf
SOCK=$STATE/podman.sock
PIDFILE=$STATE/service.pid
LOG=$STATE/service.log
# The label every container and network of podman-executor carries.
LABEL=io.depsd.podman-executor.managed=true

log() { echo "podman.sh: $*" >&2; }

write_conf() {
	local n
	n=$(ulimit -Hn)
	mkdir -p "$STATE"
	cat >"$CONF.tmp" <<EOF
[containers]
default_ulimits = ["nofile=$n:$n", "nproc=32768:32768"]

[engine]
runtime = "runc"
EOF
	mv "$CONF.tmp" "$CONF"
}

running() {
	[[ -f $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

answers() {
	CONTAINER_HOST=unix://$SOCK podman --remote info >/dev/null 2>&1
}

start_service() {
	if running && answers; then
		return
	fi
	rm -f "$SOCK"
	# From /: conmon runs in the service's working directory, not a
	# checkout that may go away.
	(cd / && CONTAINERS_CONF=$CONF exec setsid podman system service --time=0 "unix://$SOCK") \
		>"$LOG" 2>&1 </dev/null &
	echo $! >"$PIDFILE"
	local i
	for i in $(seq 1 100); do
		if answers; then
			return
		fi
		sleep 0.1
	done
	log "podman service did not answer on $SOCK; its log:"
	cat "$LOG" >&2
	exit 1
}

# import_image builds a rootfs with busybox and its applet links (sh
# included) and imports it, unless the image is already there.
import_image() {
	if CONTAINERS_CONF=$CONF podman image exists "$IMAGE"; then
		return
	fi
	local bb rootfs
	bb=$(command -v busybox || true)
	[[ -x /bin/busybox ]] && bb=/bin/busybox
	if [[ -z $bb ]]; then
		log "busybox not found: install busybox-static"
		exit 1
	fi
	rootfs=$(mktemp -d "$STATE/rootfs.XXXXXX")
	mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,tmp,etc,root,var/www}
	chmod 1777 "$rootfs/tmp"
	cp "$bb" "$rootfs/bin/busybox"
	local applet
	for applet in $("$bb" --list-full); do
		[[ $applet == bin/busybox ]] && continue
		ln -sf /bin/busybox "$rootfs/$applet"
	done
	echo "root:x:0:0:root:/root:/bin/sh" >"$rootfs/etc/passwd"
	echo "root:x:0:" >"$rootfs/etc/group"
	tar -C "$rootfs" -cf "$STATE/rootfs.tar" .
	rm -rf "$rootfs"
	CONTAINERS_CONF=$CONF podman import -q \
		--change 'CMD ["/bin/sh"]' \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		"$STATE/rootfs.tar" "$IMAGE" >/dev/null
	rm -f "$STATE/rootfs.tar"
	log "imported $IMAGE"
}

cmd_start() {
	command -v podman >/dev/null || {
		log "podman not installed"
		exit 1
	}
	write_conf
	start_service
	import_image
	echo "export CONTAINERS_CONF=$CONF CONTAINER_HOST=unix://$SOCK"
	echo "export DEPSD_TEST_IMAGE=$IMAGE"
}

cmd_stop() {
	if [[ -f $CONF ]] && command -v podman >/dev/null; then
		local ids
		ids=$(CONTAINERS_CONF=$CONF podman ps -aq --filter "label=$LABEL" || true)
		if [[ -n $ids ]]; then
			# shellcheck disable=SC2086
			CONTAINERS_CONF=$CONF podman rm -f -t 0 $ids >/dev/null || true
		fi
		ids=$(CONTAINERS_CONF=$CONF podman network ls -q --filter "label=$LABEL" || true)
		if [[ -n $ids ]]; then
			# shellcheck disable=SC2086
			CONTAINERS_CONF=$CONF podman network rm -f $ids >/dev/null || true
		fi
		ids=$(CONTAINERS_CONF=$CONF podman volume ls -q --filter "label=$LABEL" || true)
		if [[ -n $ids ]]; then
			# shellcheck disable=SC2086
			CONTAINERS_CONF=$CONF podman volume rm -f $ids >/dev/null || true
		fi
	fi
	if running; then
		local pid
		pid=$(cat "$PIDFILE")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$PIDFILE" "$SOCK"
}

RL_USER=${DEPSD_ROOTLESS_USER:-podexec-ci}
RL_STATE=$STATE/rootless
RL_RUN=$RL_STATE/run
RL_CONF=$RL_STATE/containers.conf

# as_user runs a command as the rootless user with its environment.
as_user() {
	# Not root's service: CONTAINER_HOST from `start` would send the
	# user's podman commands to root's socket (permission denied).
	runuser -u "$RL_USER" -- env -u CONTAINER_HOST -u CONTAINER_CONNECTION \
		HOME="$(getent passwd "$RL_USER" | cut -d: -f6)" \
		XDG_RUNTIME_DIR="$RL_RUN" CONTAINERS_CONF="$RL_CONF" "$@"
}

cmd_rootless_start() {
	[[ $(id -u) == 0 ]] || {
		log "rootless-start sets up a user: run it as root"
		exit 1
	}
	command -v newuidmap >/dev/null || {
		log "newuidmap missing: install uidmap"
		exit 1
	}
	cmd_start >/dev/null
	# Rootless bridge networks need slirp4netns to open /dev/net/tun as the
	# user: mode 0666 on an ordinary host, but a container may get 0600.
	if [[ -c /dev/net/tun ]] && [[ $(stat -c %a /dev/net/tun) != 666 ]]; then
		chmod 0666 /dev/net/tun
		log "made /dev/net/tun 0666 (as on an ordinary host) for rootless bridge networks"
	fi
	id "$RL_USER" >/dev/null 2>&1 || useradd -m -s /bin/sh "$RL_USER"
	grep -q "^$RL_USER:" /etc/subuid || echo "$RL_USER:300000:65536" >>/etc/subuid
	grep -q "^$RL_USER:" /etc/subgid || echo "$RL_USER:300000:65536" >>/etc/subgid
	mkdir -p "$RL_RUN"
	chmod 755 "$STATE" "$RL_STATE"
	chown "$RL_USER" "$RL_RUN"
	chmod 700 "$RL_RUN"
	printf '[containers]\ndefault_ulimits = ["nofile=1024:1024"]\n\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n' >"$RL_CONF"
	chmod 644 "$RL_CONF"
	local sock=$RL_RUN/podman/podman.sock
	if ! as_user podman --remote --url "unix://$sock" info >/dev/null 2>&1; then
		as_user mkdir -p "$RL_RUN/podman"
		# From /: conmon runs in the service's working directory, and a
		# checkout that is later removed (or root's home, which the user
		# cannot enter) fails every container start.
		(cd / && exec runuser -u "$RL_USER" -- env -u CONTAINER_HOST -u CONTAINER_CONNECTION \
			HOME="$(getent passwd "$RL_USER" | cut -d: -f6)" XDG_RUNTIME_DIR="$RL_RUN" CONTAINERS_CONF="$RL_CONF" \
			setsid podman system service --time=0 "unix://$sock") >"$RL_STATE/service.log" 2>&1 </dev/null &
		echo $! >"$RL_STATE/service.pid"
		local i
		for i in $(seq 1 100); do
			as_user podman --remote --url "unix://$sock" info >/dev/null 2>&1 && break
			sleep 0.2
		done
		as_user podman --remote --url "unix://$sock" info >/dev/null 2>&1 || {
			log "rootless podman service did not answer; its log:"
			cat "$RL_STATE/service.log" >&2
			exit 1
		}
	fi
	if ! as_user podman image exists "$IMAGE"; then
		CONTAINERS_CONF=$CONF podman save -q --format docker-archive -o "$RL_STATE/image.tar" "$IMAGE"
		chmod 644 "$RL_STATE/image.tar"
		as_user podman load -q -i "$RL_STATE/image.tar" >/dev/null
		rm -f "$RL_STATE/image.tar"
		log "loaded $IMAGE for $RL_USER"
	fi
	echo "export DEPSD_ROOTLESS_HOST=unix://$sock DEPSD_ROOTLESS_USER=$RL_USER"
}

cmd_rootless_stop() {
	if [[ -f $RL_STATE/service.pid ]]; then
		local pid
		pid=$(cat "$RL_STATE/service.pid")
		# the pid is runuser's; the service is its child
		pkill -TERM -P "$pid" 2>/dev/null || true
		kill "$pid" 2>/dev/null || true
		rm -f "$RL_STATE/service.pid"
	fi
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop ;;
rootless-start) cmd_rootless_start ;;
rootless-stop) cmd_rootless_stop ;;
*)
	echo "usage: $0 start|stop|rootless-start|rootless-stop" >&2
	exit 2
	;;
esac
