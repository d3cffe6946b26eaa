#!/usr/bin/env bash
# driver.sh: the reference custom-executor driver for the benchmark: the
# same stages as podman-executor, done with the podman CLI the way GitLab's
# documented podman/LXD examples do. Not for production use.
#
#   driver.sh config | prepare | run SCRIPT STAGE | cleanup
set -eo pipefail

NAME="bench-shell-r${CUSTOM_ENV_CI_RUNNER_SHORT_TOKEN}-p${CUSTOM_ENV_CI_PROJECT_ID}-c${CUSTOM_ENV_CI_CONCURRENT_PROJECT_ID}-j${CUSTOM_ENV_CI_JOB_ID}"
CACHE="${BENCH_CACHE_DIR:-/tmp/bench-shell-cache}/project-${CUSTOM_ENV_CI_PROJECT_ID}"

case "$1" in
config)
	printf '{"builds_dir":"/builds","cache_dir":"/cache","builds_dir_is_shared":false,"driver":{"name":"shell-podman","version":"0"}}\n'
	;;
prepare)
	podman rm -f -t 0 "$NAME" >/dev/null 2>&1 || true
	mkdir -p "$CACHE"
	podman run -d --name "$NAME" --label io.depsd.podman-executor.bench=true \
		-v "$CACHE:/cache" --entrypoint sh "$CUSTOM_ENV_CI_JOB_IMAGE" \
		-c 'while :; do sleep 3600; done' >/dev/null || exit "$SYSTEM_FAILURE_EXIT_CODE"
	;;
run)
	code=0
	podman exec -i "$NAME" sh <"$2" || code=$?
	if [ "$code" -ne 0 ]; then
		echo "$code" >"$BUILD_EXIT_CODE_FILE"
		exit "$BUILD_FAILURE_EXIT_CODE"
	fi
	;;
cleanup)
	podman rm -f -t 0 "$NAME" >/dev/null 2>&1 || true
	;;
*)
	echo "usage: $0 config|prepare|run SCRIPT STAGE|cleanup" >&2
	exit 2
	;;
esac
