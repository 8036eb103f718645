#!/bin/sh
# Compile tests/unit/cxx_headers.cpp with every C++ compiler found, at
# C++11, C++17 and C++20, -Wall -Wextra -Wpedantic -Werror, and run it.
# Usage: cxx_headers.sh SOURCE INCLUDE_DIR WORK_DIR
src=$1 inc=$2 work=$3
mkdir -p "$work" || exit 1
found=0
for cxx in g++ clang++; do
	command -v "$cxx" >/dev/null 2>&1 || continue
	found=1
	for std in c++11 c++17 c++20; do
		out=$work/cxx-$cxx-$std
		"$cxx" -std=$std -Wall -Wextra -Wpedantic \
			-Wmissing-field-initializers -Werror -I"$inc" \
			"$src" -o "$out" || { echo "FAIL: $cxx -std=$std"; exit 1; }
		"$out" || { echo "FAIL: $cxx -std=$std: wrong values"; exit 1; }
		echo "ok: $cxx -std=$std"
	done
done
[ $found = 1 ] || echo "SKIP: no C++ compiler (g++ or clang++) installed"
exit 0
