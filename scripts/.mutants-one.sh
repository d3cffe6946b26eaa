#!/usr/bin/env bash
# mutants.sh: break the code in known ways and check that the tests notice.
#
# Each mutant below is a bug that a test once let through (see issue
# "Tests that can fail"): a literal piece of source, what it becomes, and
# the tests that must then fail. The script copies the working tree to a
# scratch directory, applies one mutant at a time there (the repository is
# never touched), runs its tests, and expects them to FAIL. It exits non-zero
# when a mutant survives (its tests pass) or no longer applies (the code
# moved: update the mutant). Run it with `make mutants`, in CI and before
# a release. A run takes a few minutes, mostly compiling.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/depsd-mutants.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The working tree as it is (tracked and new files, not ignored ones).
(cd "$root" && git ls-files -z -co --exclude-standard | tar --null -T - -cf -) | tar -C "$work" -xf -

failed=0
# mutant NAME FILE FROM TO -- COMMAND...: replace every FROM (literal) by TO
# in FILE, run COMMAND in the scratch tree, expect it to fail.
mutant() {
	local name=$1 file=$2 from=$3 to=$4
	shift 4
	[ "$1" = "--" ] && shift
	cp "$work/$file" "$work/$file.orig"
	if ! FROM=$from TO=$to perl -0777 -i -pe 'BEGIN { $f = $ENV{FROM}; $t = $ENV{TO} } $n += s/\Q$f\E/$t/g; END { exit($n ? 0 : 3) }' "$work/$file"; then
		echo "STALE    $name: the code to mutate is not in $file any more; update scripts/mutants.sh"
		failed=1
	else
		local log="$work/.mutant.log"
		if (cd "$work" && "$@") >"$log" 2>&1; then
			echo "SURVIVED $name: '$*' passed with $file mutated"
			tail -20 "$log" | sed 's/^/    /'
			failed=1
		else
			echo "killed   $name ($(grep -m1 -E -- '^--- FAIL' "$log" | sed 's/^--- FAIL: //; s/ (.*//' || true))"
		fi
	fi
	mv "$work/$file.orig" "$work/$file"
}
mutant "a release tag's pipeline is dropped by the webhook receiver (tags were ignored before nodes)" \
	webhook/decode.go \
	'case a.Tag && !follows.follows(p.Project.PathWithNamespace, a.Ref, true):' \
	'case a.Tag:' \
	-- go test -count=1 -run 'TestReleaseTagAndMaintenanceBranchAcrossSIGKILL' ./e2e/

mutant "a maintenance branch's member is built on the default branch" \
	chain/nodes.go \
	'		_, ok := p.Refs[node]

mutant "a new release is applied before the scan read it (its node may not exist yet)" \
	chain/inbox.go \
	'return ok && latest.Tag == tag && tag != stored, nil' \
	'return false, nil' \
	-- go test -count=1 -run 'TestTagSeenPublishedByAReleaseMovesTheEdge' ./e2e/

mutant "a tag a release pushed is never recorded as seen" \
	daemon/verify.go \
	'if err != nil || !pushed[man.Digest] {' \
	'if true || err != nil || !pushed[man.Digest] {' \
	-- go test -count=1 -run 'TestTagSeenPublishedByAReleaseMovesTheEdge' ./e2e/

mutant "an unchanged project's refs are read again at every scan" \
	scan/refs.go \
	'if unchanged[p.ID] && old.RefsRule == p.RefsRule {' \
	'if false {' \
	-- go test -count=1 -run 'TestScanReadsFollowedRefs' ./scan/
if [ "$failed" -ne 0 ]; then
	echo "mutants: some mutants survived or are stale"
	exit 1
fi
echo "mutants: all killed"
