#!/usr/bin/env bash
# verify.sh BINDIR: check the units with `systemd-analyze verify`, as CI
# does. The units name /usr/local/bin/depsd and podman-executor; the copies
# checked here point at BINDIR (make build's bin/) instead, so the check
# runs without installing anything (a binary not built is stood in for by
# /bin/true: verify only checks that the command is executable). Exit 0 with a note when
# systemd-analyze is missing or cannot run here (some containers).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bindir=$(cd "${1:?usage: verify.sh BINDIR}" && pwd)
if ! command -v systemd-analyze >/dev/null; then
	echo "verify.sh: systemd-analyze not installed: units not verified" >&2
	exit 0
fi
if ! systemd-analyze --version >/dev/null 2>&1; then
	echo "verify.sh: systemd-analyze cannot run here: units not verified" >&2
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
for bin in depsd podman-executor; do
	if [[ -x $bindir/$bin ]]; then
		ln -s "$bindir/$bin" "$tmp/bin/$bin"
	else
		ln -s /bin/true "$tmp/bin/$bin"
	fi
done
for unit in "$here"/*.service "$here"/*.timer; do
	sed "s|/usr/local/bin/|$tmp/bin/|g" "$unit" >"$tmp/$(basename "$unit")"
done
# verify exits 0 on unknown keys and bad values ("ignoring"): any message
# at all is a failure.
out=$(systemd-analyze verify --man=no "$tmp"/*.service "$tmp"/*.timer 2>&1) || rc=$?
if [[ -n $out || ${rc:-0} -ne 0 ]]; then
	echo "$out" >&2
	echo "verify.sh: systemd-analyze verify found problems in the units" >&2
	exit 1
fi
echo "verify.sh: units verified"
