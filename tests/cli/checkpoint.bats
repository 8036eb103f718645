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
