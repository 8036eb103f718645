#!/usr/bin/env bash
# fsafe built inside a parent project (add_subdirectory): configure the
# parent in tests/install/subproject (it fails on any test target, -Werror
# or build type fsafe would impose), build it, run its consumer.
#
# usage: subproject_test.sh SOURCE_DIR CMAKE WORK_DIR
set -euo pipefail
source_dir=$1 cmake=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
"$cmake" -S "$source_dir/tests/install/subproject" -B "$work/build" \
	-DFSAFE_SOURCE="$source_dir" >"$work/configure.log" 2>&1 || {
	cat "$work/configure.log"
	echo "subproject: configuring the parent project failed" >&2
	exit 1
}
"$cmake" --build "$work/build" --parallel 2 >"$work/build.log" 2>&1 || {
	tail -40 "$work/build.log"
	echo "subproject: building the parent project failed" >&2
	exit 1
}
"$work/build/parent_consumer" "$work/out.txt" "from a parent project"
echo "ok - fsafe builds as a subproject: library only, no tests, no -Werror"
