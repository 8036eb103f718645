#!/usr/bin/env bats
# fsafe spool DIR forward against a real nats-server -js on 127.0.0.1 (a
# free port, a scratch store); skipped when nats-server is not installed.

load ../cli/helpers

setup_file() {
	NATS_SERVER=$(command -v nats-server || true)
	[ -n "$NATS_SERVER" ] || return 0
	export NS_STORE=$(mktemp -d)
	export NS_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	export NS_URL="nats://127.0.0.1:$NS_PORT"
	"$NATS_SERVER" -js -a 127.0.0.1 -p "$NS_PORT" -sd "$NS_STORE" \
		>"$NS_STORE/server.log" 2>&1 3>&- &
	echo $! >"$NS_STORE/pid"
	local i
	for i in $(seq 100); do
		"$NS_TOOL" "$NS_URL" add S rec 120000 && break
		sleep 0.1 # the server starting; bounded by 100 tries
	done
	"$NS_TOOL" "$NS_URL" add SHORT short 1000
}

teardown_file() {
	[ -n "${NS_STORE:-}" ] || return 0
	local pid i state
	pid=$(cat "$NS_STORE/pid")
	kill "$pid" 2>/dev/null || true
	# The server still writes its store while it shuts down (an rm beside
	# it once met "Directory not empty"): remove the store only when the
	# server is gone or a zombie, waiting 10 s at most.
	for i in $(seq 100); do
		state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) || break
		[ "$state" != Z ] || break
		sleep 0.1
	done
	rm -rf "$NS_STORE"
}

setup() {
	cli_setup
	[ -n "${NS_URL:-}" ] || skip "nats-server is not installed"
}

@test "forward --once publishes every record once, named, and drains" {
	printf 'one\ntwo\nthree\n' | "$FSAFE" spool sp append
	run --separate-stderr "$FSAFE" spool sp forward --nats "$NS_URL" \
		--subject rec --once
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"forwarded 3 records (11 bytes) in 1 batches, 0 retries; lag 0"* ]]
	id=$(cat sp/id)
	run "$NS_TOOL" "$NS_URL" dump S
	[ "$status" -eq 0 ]
	[ "$output" = "$id-1 one
$id-2 two
$id-3 three" ]
	run "$FSAFE" spool sp stat
	[[ "$output" == *"cursor: 4"* ]]
	# Nothing left: nothing sent again.
	printf 'four\n' | "$FSAFE" spool sp append
	run --separate-stderr "$FSAFE" spool sp forward --nats "$NS_URL" \
		--subject rec --stream S --batch 1 --once
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"forwarded 1 records"* ]]
	run "$NS_TOOL" "$NS_URL" dump S
	[ "$(echo "$output" | wc -l)" -eq 4 ]
}

@test "forward --once drains while append reads a FIFO in another process" {
	"$NS_TOOL" "$NS_URL" add CONC conc 120000
	"$FSAFE" spool sp append </dev/null
	mkfifo fifo
	# The writer pauses now and then, so append flushes batch after
	# batch while the forwarders run.
	(for i in $(seq 3000); do
		echo "line $i"
		[ $((i % 20)) -ne 0 ] || sleep 0.01
	done) >fifo 3>&- &
	"$FSAFE" spool sp append fifo 3>&- &
	app=$!
	local end=$((SECONDS + 60)) during=0 n
	while kill -0 "$app" 2>/dev/null; do
		[ "$SECONDS" -lt "$end" ] || { kill "$app"; false; }
		run --separate-stderr "$FSAFE" spool sp forward \
			--nats "$NS_URL" --subject conc --once
		[ "$status" -eq 0 ]
		n=$(sed -n 's/^forwarded \([0-9]*\) records.*/\1/p' <<<"$stderr")
		[ "${n:-0}" -eq 0 ] || during=$((during + 1))
	done
	wait "$app"
	wait
	run "$FSAFE" spool sp forward --nats "$NS_URL" --subject conc --once
	[ "$status" -eq 0 ]
	# Forwarded while append was still reading, more than once.
	[ "$during" -ge 2 ]
	id=$(cat sp/id)
	run "$NS_TOOL" "$NS_URL" dump CONC
	[ "$status" -eq 0 ]
	[ "$output" = "$(seq 3000 | sed "s/.*/$id-& line &/")" ]
	run "$FSAFE" spool sp stat
	[[ "$output" == *"cursor: 3001"* ]]
}

@test "forward shows a status line on a terminal" {
	command -v script >/dev/null || skip "script (util-linux) is not installed"
	printf 'a\nb\n' | "$FSAFE" spool sp append
	run script -qec "'$FSAFE' spool sp forward --nats '$NS_URL' --subject rec --once" /dev/null
	[ "$status" -eq 0 ]
	[[ "$output" == *"2 records, "*" records/s, lag 0"* ]]
	[[ "$output" == *"forwarded 2 records"* ]]
	# Not on a terminal: the summary only.
	printf 'c\n' | "$FSAFE" spool sp append
	run --separate-stderr "$FSAFE" spool sp forward --nats "$NS_URL" \
		--subject rec --once
	[ "$status" -eq 0 ]
	[[ "$stderr" != *"records/s"* ]]
}

@test "forward refuses a stream whose duplicate window is too short" {
	printf 'x\n' | "$FSAFE" spool sp append
	run --separate-stderr "$FSAFE" spool sp forward --nats "$NS_URL" \
		--subject short --once
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"stored twice"* ]]
	run "$FSAFE" spool sp stat
	[[ "$output" == *"cursor: 1"* ]]
}

@test "forward without --nats or --subject is a usage error" {
	run "$FSAFE" spool sp forward --subject rec
	[ "$status" -eq 2 ]
	run "$FSAFE" spool sp forward --nats "$NS_URL"
	[ "$status" -eq 2 ]
}
