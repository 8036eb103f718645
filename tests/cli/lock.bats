#!/usr/bin/env bats
# fsafe lock: run under a lock, status passthrough, holder reports, --status.

load helpers

setup() {
	cli_setup
}

teardown() {
	touch go # lets a killed holder's orphaned command end
	if [ -n "${HOLDER_PID:-}" ]; then
		kill -KILL "$HOLDER_PID" 2>/dev/null || true
		wait "$HOLDER_PID" 2>/dev/null || true
	fi
}

# Starts `fsafe lock f -- <waits for file go>` in the background and waits
# until it holds the lock.
hold_in_background() {
	"$FSAFE" lock "$@" f -- sh -c 'touch held; while [ ! -e go ]; do sleep 0.01; done' &
	HOLDER_PID=$!
	wait_until test -e held
}

@test "runs the command holding the lock and leaves nothing behind" {
	run "$FSAFE" lock f -- sh -c 'test -f f && grep -q "^pid " f'
	[ "$status" -eq 0 ]
	[ ! -e f ]
	[ -z "$(ls -A)" ]
}

@test "exits with the command's status" {
	run "$FSAFE" lock f -- sh -c 'exit 42'
	[ "$status" -eq 42 ]
	run "$FSAFE" lock f -- false
	[ "$status" -eq 1 ]
	run "$FSAFE" lock f -- sh -c 'kill -TERM $$'
	[ "$status" -eq 143 ]
	[ ! -e f ]
}

@test "a command that cannot be run exits 127" {
	run -127 "$FSAFE" lock f -- ./no-such-command
	[ "$status" -eq 127 ]
	[ ! -e f ]
}

@test "--no-wait while another fsafe lock holds it names the holder, exits 1" {
	hold_in_background
	run --separate-stderr "$FSAFE" lock --no-wait f -- touch ran
	[ "$status" -eq 1 ]
	[ ! -e ran ]
	[[ $stderr =~ ^fsafe:\ f\ is\ held\ by\ pid\ [0-9]+\ \(started\ [0-9]{4}-[0-9]{2}-[0-9]{2}\ [0-9:]{8}\)\ on\ host\ .+$ ]]
	[[ $stderr == *"pid $HOLDER_PID "* ]]
	touch go
	wait "$HOLDER_PID"
	HOLDER_PID=
	[ ! -e f ]
}

@test "--timeout waits, then gives up naming the holder" {
	hold_in_background
	run --separate-stderr "$FSAFE" lock --timeout 300ms f -- touch ran
	[ "$status" -eq 1 ]
	[ ! -e ran ]
	[[ $stderr == *"is held by pid $HOLDER_PID "* ]]
	touch go
}

@test "a waiter runs once the holder is done" {
	hold_in_background
	"$FSAFE" lock --timeout 20s f -- touch ran &
	local waiter=$!
	touch go
	wait "$waiter"
	[ -e ran ]
}

@test "a holder killed by SIGKILL does not block the next one" {
	hold_in_background
	kill -KILL "$HOLDER_PID"
	wait "$HOLDER_PID" || true
	HOLDER_PID=
	[ -e f ]
	run "$FSAFE" lock --no-wait f -- true
	[ "$status" -eq 0 ]
	[ ! -e f ]
}

@test "--status prints the record and the verdict" {
	run "$FSAFE" lock --status f
	[ "$status" -eq 1 ]
	[ "$output" = "f: not held" ]
	hold_in_background
	run --separate-stderr "$FSAFE" lock --status f
	[ "$status" -eq 0 ]
	[[ $output == *"pid $HOLDER_PID"* ]]
	[[ $output == *"host $(hostname)"* ]]
	[[ $output == *"mode link"* ]]
	[ "${lines[-1]}" = "owner alive" ]
	touch go
	wait "$HOLDER_PID"
	HOLDER_PID=
}

@test "--status of a dead owner's and another host's lock" {
	hold_in_background
	kill -KILL "$HOLDER_PID"
	wait "$HOLDER_PID" || true
	HOLDER_PID=
	run "$FSAFE" lock --status f
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = "owner dead" ]
	sed 's/^host .*/host build-3/' f > g
	rm -f f
	mv g f
	run "$FSAFE" lock --status f
	[ "${lines[-1]}" = "owner unknown" ]
	run --separate-stderr "$FSAFE" lock --no-wait f -- true
	[ "$status" -eq 1 ]
	[[ $stderr == *"on host build-3" ]]
	run "$FSAFE" lock --no-wait --force f -- true
	[ "$status" -eq 0 ]
	[ ! -e f ]
}

@test "a malformed record is reported, not crashed on" {
	printf 'garbage\n' > f
	run --separate-stderr "$FSAFE" lock --status f
	[ "$status" -eq 1 ]
	[[ $stderr == *"malformed owner record"* ]]
	run --separate-stderr "$FSAFE" lock --no-wait f -- true
	[ "$status" -eq 1 ]
	[[ $stderr == *"malformed"* ]]
}

@test "--kernel mode: held, reported, and the file stays" {
	hold_in_background --kernel
	run --separate-stderr "$FSAFE" lock --kernel --no-wait f -- true
	[ "$status" -eq 1 ]
	[[ $stderr == *"is held by pid $HOLDER_PID "* ]]
	run "$FSAFE" lock --status f
	[[ $output == *"mode kernel"* ]]
	touch go
	wait "$HOLDER_PID"
	HOLDER_PID=
	[ -e f ]
	run "$FSAFE" lock --kernel --no-wait f -- true
	[ "$status" -eq 0 ]
}

@test "usage errors exit 2" {
	run "$FSAFE" lock
	[ "$status" -eq 2 ]
	run "$FSAFE" lock f
	[ "$status" -eq 2 ]
	run "$FSAFE" lock f --
	[ "$status" -eq 2 ]
	run "$FSAFE" lock --timeout 5parsecs f -- true
	[ "$status" -eq 2 ]
	run "$FSAFE" lock --timeout 1s --no-wait f -- true
	[ "$status" -eq 2 ]
	run "$FSAFE" lock --status f extra
	[ "$status" -eq 2 ]
	run "$FSAFE" lock --bogus f -- true
	[ "$status" -eq 2 ]
	[ ! -e f ]
}

@test "the lock's staging files are not atomic-write staging names" {
	run "$FSAFE" is-staging .lock-0b3c5e7a-1d2f-4a6b-8c9d-0e1f2a3b4c5d.tmp
	[ "$status" -eq 1 ]
}

# ---- damage (issue 16) -------------------------------------------------------

@test "a FIFO or a dangling symlink as LOCKFILE is named, never waited on" {
	mkfifo f
	run timeout 10 "$FSAFE" lock f -- true
	[ "$status" -eq 1 ]
	[[ "$output" == *"a FIFO is there, not a lock file"* ]]
	run timeout 10 "$FSAFE" lock --kernel f -- true
	[ "$status" -eq 1 ]
	rm f
	ln -s nowhere f
	run timeout 10 "$FSAFE" lock f -- true
	[ "$status" -eq 1 ]
	[[ "$output" == *"a symbolic link is there"* ]]
	[ ! -e nowhere ]
}

@test "--check reports damage, --repair quarantines it and leaves a live holder's lock" {
	mkdir d
	"$FSAFE" lock d/held -- sh -c 'touch held; while [ ! -e go ]; do sleep 0.01; done' &
	HOLDER_PID=$!
	wait_until test -e held
	mkfifo d/fifo
	echo garbage > d/bad
	run timeout 10 "$FSAFE" lock --check d
	[ "$status" -eq 1 ]
	[ "$output" = "$(printf '%s\n' 'bad: owner record does not parse' \
		'fifo: not a regular file (FIFO)')" ]
	run timeout 10 "$FSAFE" lock --repair d
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "bad: owner record does not parse: quarantined as quarantine/bad" ]
	[ -f d/held ] && [ -p d/quarantine/fifo ] && [ -f d/quarantine/bad.reason ]
	run "$FSAFE" lock --check d
	[ "$status" -eq 0 ]
	touch go
	wait "$HOLDER_PID"
	HOLDER_PID=
	[ ! -e d/held ]
}

@test "--repair removes a lock whose owner is proven dead, --check only reports it" {
	mkdir d
	# A holder killed while it held the lock leaves its record behind.
	"$FSAFE" lock d/l -- sh -c 'touch held; while [ ! -e go ]; do sleep 0.01; done' &
	HOLDER_PID=$!
	wait_until test -e held
	kill -KILL "$HOLDER_PID"
	wait "$HOLDER_PID" || true
	HOLDER_PID=
	touch go
	[ -f d/l ]
	run "$FSAFE" lock --check d
	[ "$status" -eq 1 ]
	[ "$output" = "l: abandoned: its owner is dead" ]
	[ -f d/l ]
	run "$FSAFE" lock --repair d
	[ "$status" -eq 0 ]
	[ "$output" = "l: abandoned: its owner is dead: removed" ]
	[ ! -e d/l ]
}

# ---- conventions (issue 17) ---------------------------------------------------

@test "any --timeout is taken: 1000000d on a free lock runs COMMAND" {
	run timeout 10 "$FSAFE" lock -t 1000000d l -- echo ran
	[ "$status" -eq 0 ]
	[ "$output" = ran ]
}

@test "a --kernel user's lock file at rest does not keep link mode out" {
	"$FSAFE" lock --kernel l -- true
	[ -f l ]
	run timeout 10 "$FSAFE" lock --no-wait l -- echo link
	[ "$status" -eq 0 ]
	[ "$output" = link ]
	[ ! -e l ]
	run timeout 10 "$FSAFE" lock --kernel --no-wait l -- echo kernel
	[ "$status" -eq 0 ]
	[ "$output" = kernel ]
}

@test "a --kernel lock file deleted while held is reported at release" {
	run timeout 10 "$FSAFE" lock --kernel l -- rm l
	[ "$status" -eq 1 ]
	[[ "$output" == *"l was broken while rm ran"* ]]
}
