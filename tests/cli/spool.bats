#!/usr/bin/env bats
# fsafe spool: append, read, ack, check, stat, and repairs on open.

load helpers

setup() {
	cli_setup
}

@test "append lines, read them back with their numbers" {
	printf 'one\ntwo\nthree\n' | "$FSAFE" spool sp append
	run --separate-stderr "$FSAFE" spool sp read --seq
	[ "$status" -eq 0 ] && [ -z "$stderr" ]
	[ "$output" = "$(printf '1\tone\n2\ttwo\n3\tthree')" ]
	assert_no_staging sp
}

@test "append from a FILE; a last line without newline is a record" {
	printf 'a\nb' > in
	"$FSAFE" spool sp append in
	run "$FSAFE" spool sp read
	[ "$output" = "$(printf 'a\nb')" ]
}

@test "-0: NUL-separated records keep their newlines" {
	printf 'x\ny\0z\0' | "$FSAFE" spool sp append -0
	"$FSAFE" spool sp read -0 > out
	cmp out <(printf 'x\ny\0z\0')
}

@test "ack moves the cursor; read starts there; --from and --max" {
	seq 1 10 | "$FSAFE" spool sp append
	"$FSAFE" spool sp ack 7
	run "$FSAFE" spool sp read
	[ "$output" = "$(printf '8\n9\n10')" ]
	run "$FSAFE" spool sp read --from 2 --max 3
	[ "$output" = "$(printf '2\n3\n4')" ]
	run "$FSAFE" spool sp stat
	[[ "$output" == *"cursor: 8"* ]] && [[ "$output" == *"next: 11"* ]]
	[[ "$output" == *"unread: 3"* ]]
}

@test "old segments go once acked" {
	seq 1 2000 | "$FSAFE" spool sp append --segment-size 4096
	before=$(ls sp/*.seg | wc -l)
	[ "$before" -gt 3 ]
	"$FSAFE" spool sp ack 1990
	after=$(ls sp/*.seg | wc -l)
	[ "$after" -lt "$before" ]
	run "$FSAFE" spool sp read
	[ "$output" = "$(seq 1991 2000)" ]
}

@test "check: ok, then a flipped byte is reported and exit is 1" {
	seq 1 50 | "$FSAFE" spool sp append
	run "$FSAFE" spool sp check
	[ "$status" -eq 0 ]
	[[ "$output" == *"50 valid records; 0 segments with problems"* ]]
	printf 'Z' | dd of=sp/00000000000000000001.seg bs=1 seek=100 \
		conv=notrunc 2>/dev/null
	run "$FSAFE" spool sp check
	[ "$status" -eq 1 ]
	[[ "$output" == *"BAD"* ]]
}

@test "a torn tail is cut at open; what was whole stays" {
	seq 1 20 | "$FSAFE" spool sp append
	printf 'FSPR garbage' >> sp/00000000000000000001.seg
	run "$FSAFE" spool sp stat
	[[ "$output" == *"truncated: 12"* ]]
	run "$FSAFE" spool sp read
	[ "$output" = "$(seq 1 20)" ]
	echo 21 | "$FSAFE" spool sp append
	run "$FSAFE" spool sp read
	[ "$output" = "$(seq 1 21)" ]
}

@test "a corrupt middle segment is quarantined, reading goes on" {
	seq 1 300 | "$FSAFE" spool sp append --segment-size 1024
	second=$(ls sp/*.seg | sed -n 2p)
	printf 'Z' | dd of="$second" bs=1 seek=60 conv=notrunc 2>/dev/null
	run "$FSAFE" spool sp stat
	[[ "$output" == *"quarantined: 1"* ]]
	[ -e "sp/quarantine/${second##*/}" ]
	run "$FSAFE" spool sp read
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 1 ] && [ "${lines[-1]}" = 300 ]
	[ "${#lines[@]}" -lt 300 ]
}

@test "a cursor ahead of the data is clamped, not fatal" {
	seq 1 5 | "$FSAFE" spool sp append
	mkdir other && seq 1 50 | "$FSAFE" spool other append
	"$FSAFE" spool other ack 40
	cp other/cursor sp/cursor
	run "$FSAFE" spool sp stat
	[ "$status" -eq 0 ] && [[ "$output" == *"cursor: 6"* ]]
}

@test "an over-long record fails, nothing of its batch is appended" {
	printf 'ok\n%s\n' "$(head -c 100 /dev/zero | tr '\0' x)" |
		{ run "$FSAFE" spool sp append --max-record 50; \
		  [ "$status" -eq 1 ]; }
	run "$FSAFE" spool sp read
	[ -z "$output" ]
}

@test "usage errors exit 2" {
	run "$FSAFE" spool
	[ "$status" -eq 2 ]
	run "$FSAFE" spool sp frobnicate
	[ "$status" -eq 2 ]
	run "$FSAFE" spool sp ack
	[ "$status" -eq 2 ]
	run "$FSAFE" spool sp ack x
	[ "$status" -eq 2 ]
	run "$FSAFE" spool sp read --max=-1
	[ "$status" -eq 2 ]
	run "$FSAFE" spool sp stat extra
	[ "$status" -eq 2 ]
	run "$FSAFE" spool sp read --bogus
	[ "$status" -eq 2 ]
	run "$FSAFE" spool sp --help
	[ "$status" -eq 0 ] && [[ "$output" == *"usage: fsafe spool"* ]]
}

@test "reading a missing spool fails with 1 and a message" {
	run --separate-stderr "$FSAFE" spool nope read
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"nope"* ]]
}
