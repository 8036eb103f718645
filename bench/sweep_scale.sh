#!/usr/bin/env bash
# Sweep time against directory size, up to a million entries.
#   bash bench/sweep_scale.sh [DIR]   (default: a temp dir under /var/tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench-sweep -DFSAFE_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench-sweep -j "$(nproc)" --target fsafe_static >/dev/null
cc -O2 -std=c17 -Wall -Wextra -Werror -Iinclude bench/sweep_scale.c \
	build-bench-sweep/libfsafe.a -o build-bench-sweep/sweep_scale
dir=$(mktemp -d "${1:-/var/tmp}/fsafe-sweep.XXXXXX")
trap 'rm -rf "$dir"' EXIT
build-bench-sweep/sweep_scale "$dir" 10000 100000 1000000
