#!/usr/bin/env bash
# The whole test suite, as CI runs it: a gcc build and every test, a gcc
# Release build and its tests but the power cuts and the crash and damage
# loops, a build without io_uring and its batch and async tests,
# warning-free builds at every build type with gcc and clang, every test
# but fuzzing, power cuts and install under ASan+UBSan, the
# tests that run threads under ThreadSanitizer, and the bounded fuzz run.
#
# FSAFE_WERROR=ON (the project's CI sets it in .ci/run) makes warnings
# errors; a user's run of this script does not need it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
fsafe_need "${FSAFE_BUILD_DEPS[@]}" "${FSAFE_TEST_DEPS[@]}"
fsafe_need_node

out=${FSAFE_OUT:-out}
jobs=$(nproc)
werror=-DFSAFE_WERROR=${FSAFE_WERROR:-OFF}

# Each step says when it starts (seconds since the script began), so a
# log shows where CI's time went.
step() { printf '\n== [%ss] %s\n' "$SECONDS" "$*"; }
# configure DIR [cmake args...]: a fresh cache each time, so a stale
# option from an earlier run never decides what is tested.
configure() {
	local dir=$1
	shift
	rm -f "$dir/CMakeCache.txt"
	cmake -S . -B "$dir" "$werror" "$@" >/dev/null
}

# As root (CI is), the power-loss tests must run: a missing loop device or
# mkfs is then a failure, not a skip.
[ "$(id -u)" -eq 0 ] && export FSAFE_POWER_REQUIRED=1

step "gcc build, full suite"
configure "$out/gcc" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$out/gcc" -j "$jobs"
# One job over the cores: the power cuts (tests/power), two thirds of this
# step, wait on their loop devices more than they compute, and start first.
ctest --test-dir "$out/gcc" --output-on-failure -j "$((jobs + 1))" -LE fuzz

# The kill, error and damage loops ran in full above, in an optimised
# build (-O2); at -O3 they would repeat the same cases for about two and a
# half minutes more of CI's time, so this step runs the rest.
step "gcc Release build, every test but the power cuts and the crash and damage loops"
configure "$out/gcc-release" -DCMAKE_BUILD_TYPE=Release
cmake --build "$out/gcc-release" -j "$jobs"
ctest --test-dir "$out/gcc-release" --output-on-failure -j "$jobs" \
	-LE 'fuzz|power|install|crash|damage'

step "without io_uring (-DFSAFE_IO_URING=OFF): batch and async tests"
configure "$out/no-uring" -DFSAFE_IO_URING=OFF
# Only what those tests run: the whole tree is built four times below.
cmake --build "$out/no-uring" -j "$jobs" \
	--target test_batch test_async test_batch_faults
ctest --test-dir "$out/no-uring" --output-on-failure -j "$jobs" \
	-R 'batch|async'

step "warning-free at every build type (gcc and clang)"
for cc in gcc clang; do
	for type in Debug MinSizeRel Release RelWithDebInfo; do
		[ "$cc/$type" = gcc/RelWithDebInfo ] && continue # built above
		[ "$cc/$type" = gcc/Release ] && continue
		[ "$cc/$type" = clang/Debug ] && continue # the ASan build below
		echo "-- $cc $type"
		CC=$cc configure "$out/$cc-$type-build" -DCMAKE_BUILD_TYPE=$type
		cmake --build "$out/$cc-$type-build" -j "$jobs" >/dev/null
	done
done

# Also clang's Debug build for the warning check (FSAFE_WERROR applies).
step "ASan+UBSan: every test but fuzzing, power cuts and install"
CC=clang configure "$out/asan" -DFSAFE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
cmake --build "$out/asan" -j "$jobs"
# The inbox stress test ran at full size above; here a quarter of it
# keeps the sanitised run inside CI's time. The bindings' tests get ASan's
# runtime preloaded into python and node (CMakeLists.txt). Left out: the
# power cuts and the install check (they ran above, and add build time,
# not code).
FSAFE_INBOX_STRESS_N=1250 \
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ctest --test-dir "$out/asan" --output-on-failure -j "$jobs" \
	-LE 'fuzz|power|install'

# die_after_fork=0: the sync pool must start threads again in a child of a
# fork (test_sync_pool checks it), which TSan refuses by default.
step "ThreadSanitizer: the tests whose processes run threads"
CC=clang configure "$out/tsan" -DFSAFE_TSAN=ON -DCMAKE_BUILD_TYPE=Debug
# Only those tests' programs (each test is named for its own): the rest
# of the tree would add half a minute of build (24 s of 38 here) and no
# test.
cmake --build "$out/tsan" -j "$jobs" --target $(ctest --test-dir "$out/tsan" \
	-N -L threads | awk '/Test +#/ { print $3 }')
TSAN_OPTIONS=halt_on_error=1:die_after_fork=0 \
	ctest --test-dir "$out/tsan" --output-on-failure -j "$jobs" -L threads

if [ -f tests/fuzz/CMakeLists.txt ]; then
	step "libFuzzer (bounded)"
	CC=clang configure "$out/fuzz" -DFSAFE_FUZZ=ON
	# Only the fuzzers: the rest of this tree is clang's, built above.
	cmake --build "$out/fuzz" -j "$jobs" --target fsafe_fuzzers
	# Each fuzzer is one process bounded by time, so running them side by
	# side gives each a whole core for the same time and halves the step.
	ctest --test-dir "$out/fuzz" --output-on-failure -j "$jobs" -L fuzz
fi

step "mutation sample (tests/mutation: the full pass runs on demand)"
tests/mutation/run.sh --sample
