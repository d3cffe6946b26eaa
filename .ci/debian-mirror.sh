#!/usr/bin/env bash
# debian-mirror.sh SUITE: print the Debian mirror this machine's apt already
# uses for SUITE (e.g. bookworm), so that debootstrap fetches from the same
# place apt does and no mirror's host name is written into the repository.
#
# Read, as apt reads them: /etc/apt/sources.list and
# /etc/apt/sources.list.d/*.list (one-line "deb [options] URI SUITE
# COMPONENTS..."), and /etc/apt/sources.list.d/*.sources (deb822 stanzas
# with Types, URIs, Suites; "Enabled: no" skipped). The first deb source
# naming SUITE exactly wins (not SUITE-updates or SUITE-security).
#
# Exits 1, saying where it looked, when there is none.
# Environment: DEPSD_APT_ETC (default /etc/apt: tests point it elsewhere).
set -euo pipefail

suite=${1:?usage: debian-mirror.sh SUITE}
etc=${DEPSD_APT_ETC:-/etc/apt}

one_line() {
	# deb [opt=v ...] URI SUITE COMPONENTS...
	awk -v suite="$suite" '
		{ sub(/#.*/, "") }
		$1 != "deb" { next }
		{
			i = 2
			if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
			if ($(i + 1) == suite) { print $i; exit }
		}' "$1"
}

deb822() {
	awk -v suite="$suite" '
		function flush() {
			if (types ~ /(^| )deb( |$)/ && enabled != "no" && uri != "" && (" " suites " ") ~ (" " suite " ")) { print uri; found = 1; exit }
			types = ""; uri = ""; suites = ""; enabled = ""
		}
		/^[ \t]*#/ { next }
		/^[ \t]*$/ { flush(); next }
		tolower($1) == "types:" { types = $0; sub(/^[^:]*:[ \t]*/, "", types) }
		tolower($1) == "uris:" { uri = $2 }
		tolower($1) == "suites:" { suites = $0; sub(/^[^:]*:[ \t]*/, "", suites) }
		tolower($1) == "enabled:" { enabled = tolower($2) }
		END { if (!found) flush() }' "$1"
}

files=()
[[ -f $etc/sources.list ]] && files+=("$etc/sources.list")
shopt -s nullglob
for f in "$etc"/sources.list.d/*.list "$etc"/sources.list.d/*.sources; do
	files+=("$f")
done

for f in ${files[@]+"${files[@]}"}; do
	case $f in
	*.sources) mirror=$(deb822 "$f") ;;
	*) mirror=$(one_line "$f") ;;
	esac
	if [[ -n $mirror ]]; then
		echo "${mirror%/}"
		exit 0
	fi
done
echo "debian-mirror.sh: no Debian mirror for $suite in this machine's apt sources ($etc/sources.list, $etc/sources.list.d/*.list, $etc/sources.list.d/*.sources): add a \"deb URI $suite main\" source, as apt itself would need" >&2
exit 1
