#!/usr/bin/env bash
# The mutation pass: apply each mutant of mutants.txt, one at a time, to a
# scratch clone of the current commit, build what its tests need, run
# them, and say whether they noticed.
#
#   CAUGHT   a test failed (or hung past the bound)
#   MISSED   every test passed: a test is missing
#   INVALID  the mutant does not compile (fix the entry)
#   ERROR    the entry does not apply: its text is on no line or on
#            several (the code moved on: fix the entry)
# Exit 1 on any MISSED, INVALID or ERROR.
#
# Usage: tests/mutation/run.sh [--sample] [--check] [--only REGEX] [--list FILE]
#   --sample      only the entries marked "sample" (what CI runs)
#   --check       only check that every entry applies (no build; seconds):
#                 OK or ERROR per entry
#   --only REGEX  only the entries whose id matches
#   --list FILE   another list (default: mutants.txt beside this script)
# Environment: FSAFE_MUT_TIMEOUT (seconds per test, default 240; a test
# that hangs past it counts as caught), FSAFE_MUT_JOBS (build and test
# jobs, default nproc), TMPDIR.
#
# Time, measured on 2 cores shared with other work, each run including
# its build of the clone: the full list (70 mutants then; 122 now, with
# the bindings') 641 s, about 11 minutes, of which 271 s went to one
# mutant that hangs test_async until the bound (async-cancel-running-ok:
# a hang counts as caught) and ~2 minutes to the five that run the
# crash-state model; --sample (20 mutants, building only their tests'
# targets) 151 s; --check 1 s.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
list=$here/mutants.txt
sample=false
check=false
only=
while [ $# -gt 0 ]; do
	case $1 in
	--sample) sample=true ;;
	--check) check=true ;;
	--only) only=$2; shift ;;
	--list) list=$2; shift ;;
	-h|--help) sed -n '2,24p' "$0"; exit 0 ;;
	*) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
[ -f "$list" ] || { echo "run.sh: no list $list" >&2; exit 2; }
case $list in /*) ;; *) list=$PWD/$list ;; esac

repo=$(git -C "$here" rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse HEAD)
jobs=${FSAFE_MUT_JOBS:-$(nproc)}
bound=${FSAFE_MUT_TIMEOUT:-240}
work=$(mktemp -d "${TMPDIR:-/tmp}/fsafe-mutation.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/src
build=$work/build
start=$(date +%s)

git clone -q --no-checkout "$repo" "$src" && git -C "$src" checkout -q "$commit" || exit 2
printf 'mutation pass on %s (%s)\n' "$(git -C "$src" log -1 --format='%h %s')" \
	"$($sample && echo sample || echo full)${only:+, only $only}"
# The list's entries, one per line, fields split by \x1f: id, file, find,
# replacement, tests (a ctest regex), mark.
entries() {
	sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' "$list" |
	awk -F ' @ ' -v OFS=$'\x1f' '{ print $1, $2, $3, $4, $5, $6 }'
}
# Does this run take the entry with this id and mark?
wanted() {
	[ -n "$only" ] && ! [[ $1 =~ $only ]] && return 1
	! $sample || [ "$2" = sample ]
}

# Replace `find` with `repl` on the one line of `file` that holds it
# (literally). 0 done, 1 on no line, 2 on several.
apply() {
	FIND=$2 REPL=$3 awk '
		BEGIN { f = ENVIRON["FIND"]; r = ENVIRON["REPL"] }
		{ lines[NR] = $0; if (index($0, f)) { hits++; at = NR } }
		END {
			if (hits != 1) exit hits ? 2 : 1
			i = index(lines[at], f)
			lines[at] = substr(lines[at], 1, i - 1) r \
			            substr(lines[at], i + length(f))
			for (n = 1; n <= NR; n++) print lines[n] > FILENAME ".mut"
		}' "$1" && mv "$1.mut" "$1"
}

# The build targets of the tests matching a ctest regex.
targets() {
	ctest --test-dir "$build" -N -R "$1" 2>/dev/null |
	sed -n 's/^ *Test *#[0-9]*: *//p' |
	sed -e 's/^cli$/fsafe_cli/' -e 's/^power_cut_.*/test_power_cut/' \
	    -e 's/^python$/fsafe/' -e 's/^node$/fsafe_node/' \
	    -e 's/^threads_start_in_one_place$/fsafe/' |
	sort -u
}

# The unmutated clone builds first, but only what the chosen entries'
# tests need (the sample's: 31 targets, 28 s of the whole tree's 36 s on
# 2 cores; the libraries are most of it): a mutant that then fails to
# build is the mutant's fault.
base_targets() {
	while IFS=$'\x1f' read -r id _ _ _ tests mark; do
		! wanted "$id" "$mark" || targets "$tests"
	done < <(entries) | sort -u
}
if ! $check && ! {
	cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
	mapfile -t base < <(base_targets) &&
	{ [ ${#base[@]} -eq 0 ] ||
	  cmake --build "$build" -j "$jobs" --target "${base[@]}"; }
} >"$work/base.log" 2>&1; then
	tail -20 "$work/base.log"
	echo "run.sh: the unmutated clone does not build" >&2
	exit 2
fi
declare -A count=([CAUGHT]=0 [MISSED]=0 [INVALID]=0 [ERROR]=0 [OK]=0)
report() { # verdict id seconds detail
	count[$1]=$((count[$1] + 1))
	printf '%-8s %-34s %4ss  %s\n' "$1" "$2" "$3" "$4"
}

while IFS=$'\x1f' read -r -u 3 id file find repl tests mark; do
	wanted "$id" "$mark" || continue
	t0=$(date +%s)
	git -C "$src" checkout -q -- .
	if [ ! -f "$src/$file" ]; then
		report ERROR "$id" 0 "no file $file"; continue
	fi
	apply "$src/$file" "$find" "$repl"
	case $? in
	0) ;;
	1) report ERROR "$id" 0 "text not found in $file"; continue ;;
	*) report ERROR "$id" 0 "text on several lines of $file"; continue ;;
	esac
	if git -C "$src" diff --quiet; then
		report ERROR "$id" 0 "the replacement changes nothing"; continue
	fi
	if $check; then
		report OK "$id" 0 "applies"; continue
	fi
	mapfile -t tg < <(targets "$tests")
	if [ ${#tg[@]} -eq 0 ]; then
		report ERROR "$id" 0 "no test matches $tests"; continue
	fi
	if ! cmake --build "$build" -j "$jobs" --target "${tg[@]}" \
		>"$work/$id.build.log" 2>&1; then
		report INVALID "$id" $(($(date +%s) - t0)) "does not compile"
		continue
	fi
	timeout $((bound + 30)) ctest --test-dir "$build" -R "$tests" \
		-j "$jobs" --timeout "$bound" >"$work/$id.test.log" 2>&1
	rc=$?
	dt=$(($(date +%s) - t0))
	failed=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (\(.*\))$/\1 (\2)/p' \
		"$work/$id.test.log" | tr '\n' ' ')
	if [ $rc -eq 0 ]; then
		report MISSED "$id" "$dt" "ran: $tests"
	elif [ $rc -eq 124 ] || [ -z "$failed" ]; then
		report CAUGHT "$id" "$dt" "by: a hang or a crash of $tests (rc $rc)"
	else
		report CAUGHT "$id" "$dt" "by: $failed"
	fi
done 3< <(entries)

git -C "$src" checkout -q -- .
$check && printf '\n%d apply, %d errors\n' "${count[OK]}" "${count[ERROR]}"
$check || printf '\n%d caught, %d missed, %d invalid, %d errors; %d s in all\n' \
	"${count[CAUGHT]}" "${count[MISSED]}" "${count[INVALID]}" \
	"${count[ERROR]}" $(($(date +%s) - start))
[ $((count[MISSED] + count[INVALID] + count[ERROR])) -eq 0 ]
