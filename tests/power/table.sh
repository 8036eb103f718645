#!/usr/bin/env bash
# The full power-cut matrix (Layer A): every workload of every module on
# every filesystem test_power_cut knows, FSAFE_POWER_REPEATS times each
# (default 3), then the table of docs/DESIGN.md rebuilt from the suite's
# own "power-table|" lines. Needs root, like the suite.
#
# usage: tests/power/table.sh BUILD_DIR [FILESYSTEM...]
#   Runs the named filesystems (default: all) one after the other, each
#   log in BUILD_DIR/power-table/<fs>.log, then writes the table from
#   every log there between the power-table markers of docs/DESIGN.md.
#   FSAFE_POWER_TABLE_ONLY=1: no run, only the table from the logs.
set -euo pipefail
cd "$(dirname "$0")/../.."

build=${1:?usage: $0 BUILD_DIR [FILESYSTEM...]}
shift
bin=$build/tests/power/test_power_cut
logs=$build/power-table
all="ext4 ext4-noauto xfs btrfs ext2 overlay-ext4-lower overlay-ext4-upper
     overlay-xfs-lower overlay-xfs-upper"
mkdir -p "$logs"

if [ -z "${FSAFE_POWER_TABLE_ONLY:-}" ]; then
	for fs in ${*:-$all}; do
		start=$(date +%s)
		# A failing filesystem still gives its lines to the table.
		FSAFE_POWER_FULL=1 CMOCKA_MESSAGE_OUTPUT=stdout \
			"$bin" "$fs" >"$logs/$fs.log" 2>&1 || true
		printf '%-20s %5d s\n' "$fs" $(($(date +%s) - start))
	done
fi

# One row per filesystem and module: cut points summed over the module's
# workloads, violations with the code as it is, cuts after which a
# renamed inbox message had no name at all, and the violations of the
# directory-sync-less build over the workloads that must expose it.
table() {
	for fs in $all; do
		[ -f "$logs/$fs.log" ] && grep -h '^power-table|' "$logs/$fs.log"
	done | awk -F'|' '
	{
		key = $2 "|" $4
		if (!(key in seen)) { seen[key] = 1; order[n++] = key }
		if ($3 == "ok") {
			wl[key]++; pts[key] += $6; rep[key] = $7
			vio[key] += $8; secs[key] += $10
			if ($9 != "-") { lost[key] += $9; has[key] = 1 }
		} else if ($3 == "no directory sync") {
			bcuts[key] += $6 * $7; bvio[key] += $8
			secs[key] += $10
		}
	}
	END {
		print "| filesystem | module | workloads | cut points | repeats | violations | rename kept only its removal | no dir sync: violations / cuts | seconds |"
		print "|---|---|---|---|---|---|---|---|---|"
		for (i = 0; i < n; i++) {
			k = order[i]; split(k, f, "|")
			printf "| %s | %s | %d | %d | %s | %d | %s | %s | %.0f |\n",
			       f[1], f[2], wl[k], pts[k], rep[k], vio[k],
			       has[k] ? lost[k] : "-",
			       (k in bcuts) ? bvio[k] " / " bcuts[k] : "-",
			       secs[k]
		}
	}'
}

doc=docs/DESIGN.md
begin='<!-- power-table begin: tests/power/table.sh writes this -->'
end='<!-- power-table end -->'
grep -qF "$begin" "$doc" || { echo "$doc: no power-table marker" >&2; exit 1; }
body=$(table)
awk -v b="$begin" -v e="$end" -v body="$body" '
	$0 == b { print; print body; skip = 1; next }
	$0 == e { skip = 0 }
	!skip' "$doc" >"$doc.new"
mv "$doc.new" "$doc"
printf '%s\n' "$body"
