#!/usr/bin/env bash
# bench-ab.sh: one benchmark of bench/ on two builds in one run, in turns,
# so that a before/after comparison shares the machine's state: the tree
# as it is here ("head") and DEPSD_BENCH_AB_BASE (a git revision, default
# main: "base"), with this tree's benchmark files copied into the base
# (they must compile there). DEPSD_BENCH_AB_ROUNDS rounds (default 3),
# the order swapped every round (base head, head base, ...). Each result
# line is renamed BenchmarkNAME/base or /head, so that
#
#	go run ./bench/benchdoc record -- scripts/bench-ab.sh
#
# records both. By default it runs BenchmarkWebhookMix's CPU per delivery
# by kind alone (DEPSD_BENCH_MIX_PARTS=cpu): the cheap path's and the
# batched marks' gain, process-wide. DEPSD_BENCH_AB_BENCH names another
# (e.g. ReplicaCapacity, with DEPSD_BENCH_SATURATION_SECONDS=0).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=${DEPSD_BENCH_AB_BASE:-main}
rounds=${DEPSD_BENCH_AB_ROUNDS:-3}
bench=${DEPSD_BENCH_AB_BENCH:-WebhookMix}
export DEPSD_BENCH_MIX_PARTS=${DEPSD_BENCH_MIX_PARTS:-cpu}
# The base gets the mix's files, and the replicas' only when it runs
# them (they call APIs that change: a base older than them may not build
# them).
files="bench/mix_bench_test.go bench/mix_test.go"
if [ "$bench" = ReplicaCapacity ]; then
	files="$files bench/replicas_bench_test.go"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/depsd-bench-ab.XXXXXX")
trap 'rm -rf "$work"' EXIT

mkdir "$work/base"
git -C "$root" archive "$base" | tar -x -C "$work/base"
for f in $files; do
	cp "$root/$f" "$work/base/$f"
done
(cd "$work/base" && go test -c -o "$work/base.test" ./bench/) >&2
(cd "$root" && go test -c -o "$work/head.test" ./bench/) >&2

run() { # run base|head: one run of the benchmark, its lines renamed
	local which=$1 dir=$root/bench
	[ "$which" = base ] && dir=$work/base/bench
	(cd "$dir" && "$work/$which.test" -test.run '^$' -test.bench "^Benchmark$bench\$" -test.benchtime 1x -test.timeout 60m) |
		sed -E "s#^(Benchmark$bench)(-[0-9]+)?([[:space:]])#\\1/$which\\2\\3#"
}
for r in $(seq "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then
		run base
		run head
	else
		run head
		run base
	fi
done
