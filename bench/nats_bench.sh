#!/bin/bash
# Build bench/nats_bench.c against the tree, start a nats-server -js on a
# free port of 127.0.0.1 with a scratch store, run it, stop the server.
#   bench/nats_bench.sh [RECORDS] [BATCH]      (BENCH_DIR: the spool's disk)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-bench-nats"
dir=${BENCH_DIR:-$build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DFSAFE_TESTS=OFF >/dev/null
cmake --build "$build" -j2 >/dev/null
cc -O2 -I"$root/include" -I"$root/nats/include" "$root/bench/nats_bench.c" \
	"$build/nats/libfsafe-nats.a" "$build/libfsafe.a" -lnats -lpthread \
	$(pkg-config --libs liburing 2>/dev/null || true) \
	$(pkg-config --libs libcrypto 2>/dev/null || true) -o "$build/nats_bench"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
store=$(mktemp -d)
nats-server -js -a 127.0.0.1 -p "$port" -sd "$store" >"$store/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$store"' EXIT
i=0
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
	i=$((i + 1)); [ $i -lt 100 ] || { echo "nats-server not up" >&2; exit 1; }
	sleep 0.1
done
mkdir -p "$dir"
"$build/nats_bench" "nats://127.0.0.1:$port" "$dir" "$@"
