#!/usr/bin/env bats
# fsafe spool: append, read, ack, check, stat, and repairs on open.

load helpers

setup() {
	cli_setup
}

teardown() {
	if [ -n "${pid:-}" ]; then
		kill "$pid" 2>/dev/null || true
	fi
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
	run --separate-stderr "$FSAFE" spool sp read
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
	run --separate-stderr "$FSAFE" spool sp read
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
	run --separate-stderr "$FSAFE" spool sp read
	[ "$output" = "$(seq 1991 2000)" ]
}

@test "check: ok, then a flipped byte is reported and exit is 1" {
	seq 1 50 | "$FSAFE" spool sp append
	run --separate-stderr "$FSAFE" spool sp check
	[ "$status" -eq 0 ] && [ -z "$output" ]
	printf 'Z' | dd of=sp/00000000000000000001.seg bs=1 seek=100 \
		conv=notrunc 2>/dev/null
	cp -a sp before
	run --separate-stderr "$FSAFE" spool sp check
	[ "$status" -eq 1 ]
	[[ "$output" == "00000000000000000001.seg: bad frame at offset 98 ("* ]]
	[ "${#lines[@]}" -eq 1 ]
	diff -r before sp
}

@test "a corrupt middle segment costs its damaged record only" {
	seq 1 300 | "$FSAFE" spool sp append --segment-size 1024
	second=$(ls sp/*.seg | sed -n 2p)
	printf 'Z' | dd of="$second" bs=1 seek=60 conv=notrunc 2>/dev/null
	run --separate-stderr "$FSAFE" spool sp stat
	[[ "$output" == *"lost: 1"* ]]
	[[ "$stderr" == *"${second##*/}: bad frame at offset 32"* ]]
	first=$((10#$(basename "$second" .seg)))
	# Reading changes nothing and reads past the damage in place.
	cp -a sp before
	run --separate-stderr "$FSAFE" spool sp read
	[ "$status" -eq 0 ]
	[ "$output" = "$(seq 1 300 | grep -vx "$first")" ]
	diff -r before sp
	"$FSAFE" spool sp repair
	[ -e "sp/quarantine/${second##*/}@32" ]
	run --separate-stderr "$FSAFE" spool sp read
	[ "$output" = "$(seq 1 300 | grep -vx "$first")" ]
}

@test "a cursor copied from a longer spool: no number handed out twice" {
	seq 1 5 | "$FSAFE" spool sp append
	mkdir other && seq 1 50 | "$FSAFE" spool other append
	"$FSAFE" spool other ack 40
	cp other/cursor sp/cursor
	run --separate-stderr "$FSAFE" spool sp stat
	[ "$status" -eq 0 ] && [[ "$output" == *"cursor: 41"* ]]
	[[ "$output" == *"next: 41"* ]] && [[ "$stderr" == *"ahead of the data"* ]]
	echo late | "$FSAFE" spool sp append
	run "$FSAFE" spool sp read --seq
	[ "$output" = "$(printf '41\tlate')" ]
}

# Issue 16, reproducer 1: damage inside the last segment is not a torn
# tail when valid frames follow it.
@test "damage inside the only segment: 494 records salvaged, bytes kept" {
	seq 1 500 | sed s/^/m-/ | "$FSAFE" spool S append
	seg=S/00000000000000000001.seg
	printf '\0\0\0\0\0\0\0\0' | dd of=$seg bs=1 seek=200 conv=notrunc \
		2>/dev/null
	run --separate-stderr "$FSAFE" spool S read
	[ "$status" -eq 0 ]
	# Records 5 and 6 held the damaged bytes (frames at 172 and 207).
	[ "$output" = "$(seq 1 500 | grep -vxE '5|6' | sed s/^/m-/)" ]
	[[ "$stderr" == *"00000000000000000001.seg: bad frame at offset 172"* ]]
	[[ "$stderr" == *"2 records lost"* ]]
	[ ! -e S/quarantine ] # reading changed nothing
	run --separate-stderr "$FSAFE" spool S append <<< m-501
	[[ "$stderr" == *"494 records after it salvaged"* ]]
	[ -s S/quarantine/00000000000000000001.seg@172 ]
	run --separate-stderr "$FSAFE" spool S read
	[ "$output" = "$(seq 1 501 | grep -vxE '5|6' | sed s/^/m-/)" ]
	run "$FSAFE" spool S stat
	[[ "$output" == *"salvaged: 0"* ]] && [[ "$output" == *"lost: 2"* ]]
	[[ "$output" == *"quarantine-entries: 1"* ]]
}

@test "a torn tail is cut at open; what was whole stays" {
	seq 1 20 | "$FSAFE" spool sp append
	printf 'FSPR garbage' >> sp/00000000000000000001.seg
	run "$FSAFE" spool sp stat
	[[ "$output" == *"truncated: 12"* ]]
	run --separate-stderr "$FSAFE" spool sp read
	[ "$output" = "$(seq 1 20)" ]
	echo 21 | "$FSAFE" spool sp append
	run --separate-stderr "$FSAFE" spool sp read
	[ "$output" = "$(seq 1 21)" ]
}

@test "a torn tail is still cut, and its bytes go to quarantine" {
	seq 1 20 | "$FSAFE" spool sp append
	printf 'FSPR garbage' >> sp/00000000000000000001.seg
	run --separate-stderr "$FSAFE" spool sp repair
	[ "$status" -eq 0 ]
	[[ "$output" == *"torn tail at offset"*"12 bytes quarantined"* ]]
	[ "$(cat sp/quarantine/*)" = "FSPR garbage" ]
	run "$FSAFE" spool sp check
	[ "$status" -eq 0 ] && [ -z "$output" ]
}

# Reproducer 2: a cursor ahead of the data, the data cut from outside.
@test "ack, then the last segment cut: later appends are read, no reuse" {
	seq 1 20 | "$FSAFE" spool sp append
	"$FSAFE" spool sp ack 9
	truncate -s 100 sp/00000000000000000001.seg
	run "$FSAFE" spool sp check
	[ "$status" -eq 1 ] && [[ "$output" == *"cursor: cursor 10 is ahead"* ]]
	printf 'a\nb\n' | "$FSAFE" spool sp append
	run "$FSAFE" spool sp read --seq
	[ "$output" = "$(printf '10\ta\n11\tb')" ]
	echo c | "$FSAFE" spool sp append
	run "$FSAFE" spool sp read --seq
	[ "$output" = "$(printf '10\ta\n11\tb\n12\tc')" ]
}

# Reproducer 3: a stray entry named like a later segment.
@test "a stray later segment name never makes the real last one middle" {
	seq 1 20 | "$FSAFE" spool sp append
	printf 'FSPR garbage' >> sp/00000000000000000001.seg
	echo junk > sp/00000000000000000099.seg
	run --separate-stderr "$FSAFE" spool sp read
	[ "$output" = "$(seq 1 20)" ]
	echo 21 | "$FSAFE" spool sp append
	[ -e sp/quarantine/00000000000000000099.seg ]
	run --separate-stderr "$FSAFE" spool sp read
	[ "$output" = "$(seq 1 21)" ]
}

@test "a stray segment name that is a symlink or a directory" {
	seq 1 20 | "$FSAFE" spool sp append
	ln -s /etc/passwd sp/00000000000000000099.seg
	mkdir sp/00000000000000000098.seg
	run "$FSAFE" spool sp check
	[ "$status" -eq 1 ]
	[[ "$output" == *"99.seg: a symbolic link, not a file"* ]]
	[[ "$output" == *"98.seg: a directory, not a file"* ]]
	run --separate-stderr "$FSAFE" spool sp read
	[ "$status" -eq 0 ] && [ "$output" = "$(seq 1 20)" ]
	"$FSAFE" spool sp repair
	[ -L sp/quarantine/00000000000000000099.seg ]
	[ -d sp/quarantine/00000000000000000098.seg ]
}

# Reproducer 5: FIFOs never hang a command.
@test "a FIFO as a segment or as the cursor: no command hangs" {
	seq 1 20 | "$FSAFE" spool sp append
	"$FSAFE" spool sp ack 3
	mkfifo sp/00000000000000000050.seg
	mv sp/cursor cursor.bak && mkfifo sp/cursor
	run timeout 10 "$FSAFE" spool sp check
	[ "$status" -eq 1 ]
	[[ "$output" == *"cursor: not a regular file"* ]]
	[[ "$output" == *"50.seg: not a regular file"* ]]
	run --separate-stderr timeout 10 "$FSAFE" spool sp read
	[ "$status" -eq 0 ] && [ "$output" = "$(seq 1 20)" ]
	run timeout 10 "$FSAFE" spool sp repair
	[ "$status" -eq 0 ]
	[ -p sp/quarantine/cursor ]
	[ -p sp/quarantine/00000000000000000050.seg ]
}

# Reproducer 6: a quarantine/ that is a symlink leads nothing out.
@test "a quarantine symlink is moved aside, nothing lands outside" {
	seq 1 20 | "$FSAFE" spool sp append
	mkdir outside
	ln -s "$PWD/outside" sp/quarantine
	echo junk > sp/00000000000000000099.seg
	run "$FSAFE" spool sp repair
	[ "$status" -eq 0 ]
	[[ "$output" == *"quarantine: a symbolic link, not a directory"* ]]
	[ -z "$(ls -A outside)" ]
	[ -d sp/quarantine ] && [ ! -L sp/quarantine ]
	[ -L sp/quarantine/quarantine ]
	[ -e sp/quarantine/00000000000000000099.seg ]
}

# A batch ends where the input pauses; from a regular file it never does,
# so these two read files: through a pipe, the two writes of the producer
# (bash's printf writes "ok\n" alone) may arrive apart, "ok" then is a
# batch of its own and is appended (seen once each in a loaded ctest -j2).
@test "an over-long record fails, nothing of its batch is appended" {
	printf 'ok\n%s\n' "$(head -c 100 /dev/zero | tr '\0' x)" > input
	run "$FSAFE" spool sp append --max-record 50 < input
	[ "$status" -eq 1 ]
	run --separate-stderr "$FSAFE" spool sp read
	[ -z "$output" ]
}

@test "a record over --max-record is refused before it is read whole" {
	{ printf 'ok\n'; head -c 300000 /dev/zero | tr '\0' x; } > input
	run --separate-stderr "$FSAFE" spool sp append --max-record 1K < input
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"a record is longer than 1024 bytes (--max-record)"* ]]
	run --separate-stderr "$FSAFE" spool sp read
	[ -z "$output" ]
	# An endless line: refused at the bound, not read until memory ends.
	run --separate-stderr timeout 20 "$FSAFE" spool sp append --max-record 1K < /dev/zero
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"longer than 1024 bytes"* ]]
}

@test "records that arrive in one write stay one batch while input stays open" {
	mkfifo in
	"$FSAFE" spool sp append --max-record 50 < in > /dev/null 2> append.err 3>&- &
	pid=$!
	exec {w}> in
	# One write (cat's; bash's printf writes "ok\n" and the rest apart),
	# the input left open: the batch holds both records, so the
	# over-long one fails it whole and append exits without EOF.
	printf 'ok\n%s\n' "$(head -c 100 /dev/zero | tr '\0' x)" > payload
	cat payload >&"$w"
	status=0
	wait "$pid" || status=$?
	exec {w}>&-
	[ "$status" -eq 1 ]
	run --separate-stderr "$FSAFE" spool sp read
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

# Polls `fsafe spool sp read` until it prints $1, for 10 s at most.
read_until() {
	local end=$((SECONDS + 10))
	while ((SECONDS < end)); do
		out=$(timeout 10 "$FSAFE" spool sp read 2>/dev/null) &&
			[ "$out" = "$1" ] && return 0
		sleep 0.05
	done
	echo "read gave: $out" >&2
	return 1
}

@test "append runs on while read and ack work from another process" {
	mkfifo in
	# Not holding bats' descriptors: a failure must not wait for it.
	"$FSAFE" spool sp append < in > /dev/null 2> append.err 3>&- &
	pid=$!
	exec {w}> in
	printf 'one\ntwo\n' >&"$w"
	# Each line is durable and readable once the input pauses.
	read_until "$(printf 'one\ntwo')"
	run --separate-stderr timeout 10 "$FSAFE" spool sp ack 1
	[ "$status" -eq 0 ] && [ -z "$stderr" ]
	printf 'three\n' >&"$w"
	read_until "$(printf 'two\nthree')"
	run --separate-stderr timeout 10 "$FSAFE" spool sp ack 3
	[ "$status" -eq 0 ]
	printf 'four\n' >&"$w"
	read_until four
	exec {w}>&-
	wait "$pid"
	run --separate-stderr "$FSAFE" spool sp read --seq
	[ "$output" = "$(printf '4\tfour')" ]
	run "$FSAFE" spool sp check
	[ "$status" -eq 0 ]
}
