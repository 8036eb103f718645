#!/usr/bin/env bats
# fsafe inbox: put, take (path or content, waiting), ack, release, recover
# of named consumers only on request, ls, bad input, exit statuses.

load helpers

setup() {
	cli_setup
}

@test "put prints an id; take claims it; ack removes it" {
	run "$FSAFE" inbox ib put <<<"hello"
	[ "$status" -eq 0 ]
	id=$output
	[ "${#id}" -eq 60 ]
	run "$FSAFE" inbox ib take
	[ "$status" -eq 0 ]
	[ "$output" = "$id ib/claimed/n-cli/$id" ]
	[ "$(cat "ib/claimed/n-cli/$id" | tail -c 6)" = "hello" ]
	run "$FSAFE" inbox ib ack "$id"
	[ "$status" -eq 0 ]
	[ -z "$(ls -A ib/new)" ]
	[ -z "$(ls -A ib/claimed/n-cli)" ]
	run "$FSAFE" inbox ib ack "$id"
	[ "$status" -eq 1 ]
	[[ "$output" == *"no such claim"* ]]
	assert_no_staging ib/new
}

@test "take gives FIFO order and --content writes the message" {
	printf 'one' > f1
	"$FSAFE" inbox ib put f1 >/dev/null
	printf 'two' | "$FSAFE" inbox ib put - >/dev/null
	run --separate-stderr "$FSAFE" inbox ib take --content
	[ "$status" -eq 0 ]
	[ "$output" = "one" ]
	[ "${#stderr}" -eq 60 ]
	run --separate-stderr "$FSAFE" inbox ib take --content
	[ "$output" = "two" ]
}

@test "take with nothing there exits 3, also after --timeout" {
	mkdir x
	"$FSAFE" inbox ib put </dev/null >/dev/null
	"$FSAFE" inbox ib take >/dev/null
	run "$FSAFE" inbox ib take
	[ "$status" -eq 3 ]
	run "$FSAFE" inbox ib take --timeout 100ms
	[ "$status" -eq 3 ]
}

@test "take --wait returns once a message arrives" {
	"$FSAFE" inbox ib put </dev/null >/dev/null
	"$FSAFE" inbox ib take >/dev/null
	( sleep 0.3; echo late | "$FSAFE" inbox ib put >/dev/null ) &
	run --separate-stderr "$FSAFE" inbox ib take --wait --timeout 10s --content
	wait
	[ "$status" -eq 0 ]
	[ "$output" = "late" ]
}

@test "a named consumer's claims survive recover until asked for" {
	echo a | "$FSAFE" inbox ib put >/dev/null
	"$FSAFE" inbox ib take --consumer worker >/dev/null
	run "$FSAFE" inbox ib recover
	[ "$status" -eq 0 ]
	[[ "$output" == "returned 0 claims"* ]]
	[ -z "$(ls -A ib/new)" ]
	run "$FSAFE" inbox ib ls
	[[ "$output" == "claimed n-worker "* ]]
	run "$FSAFE" inbox ib recover --consumer worker
	[ "$status" -eq 0 ]
	[ "$output" = "returned 1 claims of consumer worker" ]
	run "$FSAFE" inbox ib ls
	[[ "$output" == "new "* ]]
}

@test "release puts a claim back" {
	id=$(echo r | "$FSAFE" inbox ib put)
	"$FSAFE" inbox ib take >/dev/null
	run "$FSAFE" inbox ib release "$id"
	[ "$status" -eq 0 ]
	[ -e "ib/new/$id" ]
}

@test "a message over --max-size is refused; a foreign file is quarantined" {
	head -c 100 /dev/zero > big
	run "$FSAFE" inbox ib put --max-size 10 big
	[ "$status" -eq 1 ]
	[[ "$output" == *"over --max-size"* ]]
	echo junk > ib/new/0 # sorts before any id
	echo ok | "$FSAFE" inbox ib put >/dev/null
	run --separate-stderr "$FSAFE" inbox ib take --content
	[ "$status" -eq 0 ]
	[ "$output" = "ok" ]
	[[ "$stderr" == *"1 bad files moved to quarantine/"* ]]
	[ -e ib/quarantine/0 ]
	grep -q "foreign name" ib/quarantine/0.reason
}

@test "recover sweeps abandoned staging files by age" {
	"$FSAFE" inbox ib put </dev/null >/dev/null
	: > ib/new/.fsafe-0123456789abcdef01234567.tmp
	run "$FSAFE" inbox ib recover
	[[ "$output" == *"swept 0 staging"* ]]
	run "$FSAFE" inbox ib recover --older-than 0s
	[[ "$output" == *"swept 1 staging"* ]]
	assert_no_staging ib/new
}

@test "usage errors exit 2" {
	run "$FSAFE" inbox ib
	[ "$status" -eq 2 ]
	run "$FSAFE" inbox ib frob
	[ "$status" -eq 2 ]
	run "$FSAFE" inbox ib ack
	[ "$status" -eq 2 ]
	run "$FSAFE" inbox ib take --timeout soon
	[ "$status" -eq 2 ]
	run "$FSAFE" inbox missing take
	[ "$status" -eq 1 ]
	run "$FSAFE" inbox --help
	[ "$status" -eq 0 ]
}

@test "take whose output fails returns the claim (a full disk, a closed pipe)" {
	echo once | "$FSAFE" inbox ib put >/dev/null
	run --separate-stderr bash -c "'$FSAFE' inbox ib take --content > /dev/full"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"returned to new/"* ]]
	[ -z "$(ls -A ib/claimed/n-cli)" ]
	# A pipe whose reader is gone before take starts (a reader that is
	# merely about to exit could still take the bytes).
	mkfifo gone
	exec {r}<>gone {w}>gone {r}<&-
	status=0
	"$FSAFE" inbox ib take --content >&"$w" 2>/dev/null || status=$?
	exec {w}>&-
	[ "$status" -ne 0 ]
	[ -z "$(ls -A ib/claimed/n-cli)" ]
	run --separate-stderr "$FSAFE" inbox ib take --content
	[ "$status" -eq 0 ]
	[ "$output" = "once" ]
}

@test "check reads, repair quarantines; ls counts quarantined files and never follows a link" {
	echo a | "$FSAFE" inbox ib put >/dev/null
	mkdir -p elsewhere && echo outside > elsewhere/f
	mkdir -p ib/claimed && ln -s ../../elsewhere ib/claimed/n-cli
	mkfifo ib/new/0000000000000000.000000000000.00000000.00000000.000000000000
	run timeout 10 "$FSAFE" inbox ib check
	[ "$status" -eq 1 ]
	[[ "$output" == *"claimed/n-cli: not a directory (symbolic link)"* ]]
	[[ "$output" == *"new/0000000000000000."*": not a regular file (FIFO)"* ]]
	[ -p ib/new/0000000000000000.000000000000.00000000.00000000.000000000000 ]
	run timeout 10 "$FSAFE" inbox ib take
	[ "$status" -eq 1 ]
	[[ "$output" == *"see check and repair"* ]]
	run --separate-stderr timeout 10 "$FSAFE" inbox ib ls
	[[ "$stderr" == *"claimed/n-cli (not followed"* ]]
	[[ "$output" != *" f"* ]]
	[[ "$output" == *"quarantined 0" ]]
	run timeout 10 "$FSAFE" inbox ib repair
	[ "$status" -eq 0 ]
	[[ "$output" == *"claimed/n-cli: not a directory (symbolic link): quarantined as quarantine/n-cli"* ]]
	run timeout 10 "$FSAFE" inbox ib check
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	run timeout 10 "$FSAFE" inbox ib ls
	[[ "$output" == *"quarantined 2" ]]
	[ "$(cat elsewhere/f)" = outside ]
	run --separate-stderr "$FSAFE" inbox ib take --content
	[ "$status" -eq 0 ]
	[ "$output" = "a" ]
	run "$FSAFE" inbox missing check
	[ "$status" -eq 2 ]
}
