#!/usr/bin/env bats
# fsafe checkpoint: save, load, ls, log, verify, damage and fallback.

load helpers

setup() {
	cli_setup
	printf 'one' > a.txt
	head -c 70000 /dev/urandom > b.bin
	: > empty
}

@test "save then load gives the same bytes" {
	run "$FSAFE" checkpoint ck save --revision r1 a.txt b.bin empty
	[ "$status" -eq 0 ]
	[ "$output" = 1 ]
	run "$FSAFE" checkpoint ck load out
	[ "$status" -eq 0 ]
	cmp a.txt out/a.txt
	cmp b.bin out/b.bin
	cmp empty out/empty
	assert_no_staging ck
	assert_no_staging out
}

@test "a new save is a new generation; an older one still loads" {
	"$FSAFE" checkpoint ck save a.txt b.bin
	cp a.txt a.old
	printf 'two' > a.txt
	run "$FSAFE" checkpoint ck save a.txt b.bin
	[ "$output" = 2 ]
	"$FSAFE" checkpoint ck load --generation 1 old
	cmp a.old old/a.txt
	"$FSAFE" checkpoint ck load new
	cmp a.txt new/a.txt
}

@test "ls lists generations with revision, files and sizes" {
	"$FSAFE" checkpoint ck save --revision engine-7 a.txt b.bin
	run "$FSAFE" checkpoint ck ls
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == "generation 1 (current)"*'revision "engine-7"  2 files  70003 bytes' ]]
	[[ "$output" == *" 70000  b.bin"* ]]
	[[ "$output" == *" 3  a.txt"* ]]
}

@test "log shows the audit trail" {
	"$FSAFE" checkpoint ck save a.txt
	"$FSAFE" checkpoint ck save a.txt
	"$FSAFE" checkpoint ck save a.txt
	run "$FSAFE" checkpoint ck log
	[ "$status" -eq 0 ]
	[ "$(grep -c ' saved ' <<<"$output")" -eq 3 ]
	[ "$(grep -c ' removed ' <<<"$output")" -eq 1 ]
}

@test "verify finds a damaged file, load refuses it, --fallback loads the older set" {
	"$FSAFE" checkpoint ck save a.txt b.bin
	printf 'two' > a.txt
	"$FSAFE" checkpoint ck save a.txt b.bin
	printf 'rot' > ck/gen-000000000002/a.txt
	run "$FSAFE" checkpoint ck verify
	[ "$status" -eq 1 ]
	[[ "$output" == *"generation 2: damaged: a.txt"* ]]
	[[ "$output" == *"generation 1: ok"* ]]
	run "$FSAFE" checkpoint ck load out
	[ "$status" -eq 1 ]
	[[ "$output" == *"generation 2 is damaged: a.txt"* ]]
	run "$FSAFE" checkpoint ck load --fallback out
	[ "$status" -eq 0 ]
	[[ "$output" == *"loaded generation 1 instead"* ]]
	[ "$(cat out/a.txt)" = one ]
}

@test "a different revision is a warning, not a failure" {
	"$FSAFE" checkpoint ck save --revision v1 a.txt
	run "$FSAFE" checkpoint ck load --revision v2 out
	[ "$status" -eq 0 ]
	[[ "$output" == *'saved by revision "v1", not "v2"'* ]]
}

@test "a partial generation is ignored and removed by the next save" {
	"$FSAFE" checkpoint ck save a.txt
	mkdir ck/gen-000000000002
	printf 'partial' > ck/gen-000000000002/a.txt
	"$FSAFE" checkpoint ck load out
	[ "$(cat out/a.txt)" = one ]
	run "$FSAFE" checkpoint ck save b.bin
	# 2 existed (and its removal is in the log): never reused.
	[ "$output" = 3 ]
	run "$FSAFE" checkpoint ck load out2
	cmp b.bin out2/b.bin
	[ ! -e out2/a.txt ]
}

@test "usage errors exit 2, missing checkpoints exit 1" {
	run "$FSAFE" checkpoint ck
	[ "$status" -eq 2 ]
	run "$FSAFE" checkpoint ck frobnicate
	[ "$status" -eq 2 ]
	run "$FSAFE" checkpoint ck save
	[ "$status" -eq 2 ]
	run "$FSAFE" checkpoint ck load --generation x out
	[ "$status" -eq 2 ]
	run "$FSAFE" checkpoint nothing ls
	[ "$status" -eq 1 ]
	mkdir ck2
	run "$FSAFE" checkpoint ck2 load out
	[ "$status" -eq 1 ]
	run "$FSAFE" checkpoint ck save missing-file
	[ "$status" -eq 1 ]
}

# ---- damaged state (issue 16) ----------------------------------------------

two_saves() {
	"$FSAFE" checkpoint ck save a.txt b.bin >/dev/null
	printf 'two' > a.txt
	"$FSAFE" checkpoint ck save a.txt b.bin >/dev/null
}

@test "CURRENT lost: load names it, --fallback loads the newest set, save removes nothing and takes a new number" {
	two_saves
	rm ck/CURRENT
	run "$FSAFE" checkpoint ck load out
	[ "$status" -eq 1 ]
	[[ "$output" == *"CURRENT"* ]]
	run "$FSAFE" checkpoint ck load --fallback out
	[ "$status" -eq 0 ]
	[[ "$output" == *"loaded generation 2 instead"* ]]
	[ "$(cat out/a.txt)" = two ]
	run "$FSAFE" checkpoint ck check
	[ "$status" -eq 1 ]
	[ "$output" = "CURRENT: missing" ]
	run "$FSAFE" checkpoint ck save a.txt
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = 3 ]
	[[ "$output" == *"CURRENT: missing: no generation is removed"* ]]
	[ -d ck/gen-000000000001 ] && [ -d ck/gen-000000000002 ]
	run "$FSAFE" checkpoint ck log
	[[ "$output" != *removed* ]]
}

@test "garbage in CURRENT: every command names CURRENT; repair rebuilds it and keeps the garbage" {
	two_saves
	echo garbage > ck/CURRENT
	run "$FSAFE" checkpoint ck ls
	[ "$status" -eq 0 ]
	[[ "$output" == *"CURRENT: malformed"* ]]
	run "$FSAFE" checkpoint ck verify
	[ "$status" -eq 1 ]
	[[ "$output" == *"CURRENT: malformed"* ]]
	run "$FSAFE" checkpoint ck repair
	[ "$status" -eq 0 ]
	[ "$output" = "CURRENT: malformed: quarantined as quarantine/CURRENT; rebuilt from gen-000000000002" ]
	[ "$(cat ck/quarantine/CURRENT)" = garbage ]
	run "$FSAFE" checkpoint ck check
	[ "$status" -eq 0 ]
	"$FSAFE" checkpoint ck load out
	[ "$(cat out/a.txt)" = two ]
}

@test "verify fails when CURRENT names a generation that does not exist" {
	two_saves
	echo gen-000000000009 > ck/CURRENT
	run "$FSAFE" checkpoint ck verify
	[ "$status" -eq 1 ]
	[[ "$output" == *"CURRENT: names gen-000000000009, which is missing or damaged"* ]]
}

@test "a FIFO as CURRENT, a manifest, a file or events.log hangs no command" {
	for f in CURRENT gen-000000000002/.manifest gen-000000000002/a.txt events.log; do
		rm -rf ck
		two_saves
		rm ck/$f
		mkfifo ck/$f
		for c in ls verify check log "load --fallback out" "save a.txt" repair; do
			run timeout 10 "$FSAFE" checkpoint ck $c
			[ "$status" -ne 124 ] || { echo "$c hung on a FIFO as $f"; false; }
		done
		run "$FSAFE" checkpoint ck check
		[ "$status" -eq 0 ]
		rm -rf out
	done
}

@test "a damaged generation: check exits 1 naming the file, repair quarantines it" {
	two_saves
	printf 'rot' > ck/gen-000000000002/a.txt
	run "$FSAFE" checkpoint ck check
	[ "$status" -eq 1 ]
	[[ "${lines[0]}" == "gen-000000000002/a.txt: damaged"* ]]
	[ -d ck/gen-000000000002 ]
	run "$FSAFE" checkpoint ck repair
	[ "$status" -eq 0 ]
	[[ "$output" == *"quarantined as quarantine/gen-000000000002"* ]]
	[[ "$output" == *"rebuilt from gen-000000000001"* ]]
	[ "$(cat ck/quarantine/gen-000000000002/a.txt)" = rot ]
	"$FSAFE" checkpoint ck load out
	[ "$(cat out/a.txt)" = one ]
}

@test "load never writes through a link in OUTDIR" {
	"$FSAFE" checkpoint ck save a.txt
	mkdir out
	printf 'precious' > victim
	ln -s ../victim out/a.txt
	run "$FSAFE" checkpoint ck load out
	[ "$status" -eq 0 ]
	[ "$(cat victim)" = precious ]
	[ ! -L out/a.txt ]
	[ "$(cat out/a.txt)" = one ]
}

@test "load into an OUTDIR holding another set's file fails and writes nothing" {
	"$FSAFE" checkpoint ck save a.txt
	mkdir out
	printf 'old' > out/other.txt
	run "$FSAFE" checkpoint ck load out
	[ "$status" -eq 1 ]
	[[ "$output" == *'holds "other.txt", which is not in the set'* ]]
	[ ! -e out/a.txt ]
	[ "$(cat out/other.txt)" = old ]
}

@test "check and repair: usage and a clean store" {
	"$FSAFE" checkpoint ck save a.txt
	run "$FSAFE" checkpoint ck check
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	run "$FSAFE" checkpoint ck repair
	[ "$status" -eq 0 ]
	run "$FSAFE" checkpoint ck check extra
	[ "$status" -eq 2 ]
	run "$FSAFE" checkpoint nothing check
	[ "$status" -eq 2 ]
}
