#!/usr/bin/env bash
# The README's first command: build fsafe and show it doing real work.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
fsafe_need "${FSAFE_BUILD_DEPS[@]}"

out=${FSAFE_OUT:-out}
cmake -S . -B "$out/demo" -DFSAFE_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$out/demo" -j "$(nproc)" >/dev/null
export PATH="$PWD/$out/demo/tools:$PATH"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$*"; eval "$*"; }

echo "fsafe $(fsafe --version | cut -d' ' -f2): a demonstration in $dir"

run "printf 'port = 8080\nworkers = 4\n' | fsafe write config.toml"
run "cat config.toml"
run "sort -r config.toml | fsafe write config.toml   # like sponge, but durable"
run "cat config.toml"

# A writer killed half-way: it has written part of the new content when
# SIGKILL arrives. --no-tmpfile uses a named staging file, so the crash
# leaves one behind, as it would on a filesystem without O_TMPFILE.
say "a writer is SIGKILLed half-way through replacing config.toml"
mkfifo input
fsafe write --no-tmpfile config.toml <input &
writer=$!
exec 3>input
printf 'port = 9999\nwork' >&3
# Wait until the partial input has reached the staging file, then kill.
for _ in $(seq 1000); do
	[ -n "$(find . -maxdepth 1 -name '.fsafe-*' -size +0c)" ] && break
	sleep 0.01
done
kill -KILL "$writer"
wait "$writer" 2>/dev/null || true
exec 3>&-
run "cat config.toml   # the old content, whole"
run "ls -Al   # the staging file holds the partial new content"
leftover=$(ls -A | grep '^\.fsafe-' | head -n1)
run "fsafe is-staging '$leftover' && echo '$leftover is an fsafe staging file'"
run "fsafe is-staging config.toml || echo 'config.toml is not'"
run "fsafe sweep --older-than 0s ."
run "ls -A"

run "printf 'v1\n' | fsafe write --create-only instance.id"
run "printf 'v2\n' | fsafe write --create-only instance.id || echo \"exit \$?: existing file untouched: \$(cat instance.id)\""
run "printf 'nested\n' | fsafe write --mkdir a/b/c/file && cat a/b/c/file"
run "printf 'copies/a\\0config.toml\\0copies/b\\0instance.id\\0' | fsafe write --batch --mkdir && ls copies"
run "fsafe lock app.lock -- sh -c 'fsafe lock --no-wait app.lock -- true || echo \"second holder refused while we hold it\"'"
