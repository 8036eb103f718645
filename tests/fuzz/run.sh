#!/bin/sh
# run.sh FUZZER SEED_CORPUS DICT SECONDS
# Fuzz for SECONDS on a temporary copy of the seed corpus (new inputs go
# there, never into the source tree); a finding is kept in the current
# directory (the build tree) as crash-*, and fails the run.
set -u
fuzzer=$1 seeds=$2 dict=$3 seconds=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/fsafe-fuzz-corpus-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cp -R "$seeds"/. "$work"/
"$fuzzer" -max_total_time="$seconds" -timeout=10 -dict="$dict" \
	-artifact_prefix="$PWD/" -print_final_stats=1 "$work"
