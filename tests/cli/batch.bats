#!/usr/bin/env bats
# fsafe write --batch: many targets in group commits.

load helpers

setup() {
	cli_setup
}

@test "every target gets its source's bytes" {
	mkdir src
	for i in $(seq 1 300); do head -c $((i * 37)) /dev/urandom > "src/$i"; done
	for i in $(seq 1 300); do printf 'out/%s\0src/%s\0' "$i" "$i"; done > pairs
	"$FSAFE" write --batch --mkdir < pairs
	for i in $(seq 1 300); do cmp "src/$i" "out/$i"; done
	assert_no_staging out
}

@test "replaces existing targets and keeps their mode" {
	printf 'old\n' > t
	chmod 640 t
	printf 'new\n' > s
	printf 't\0s\0' | "$FSAFE" write --batch
	[ "$(cat t)" = new ]
	[ "$(stat -c %a t)" = 640 ]
}

@test "a failed target is reported and the others still land" {
	printf 'keep\n' > exists
	printf 'one\n' > s1
	printf 'two\n' > s2
	run -1 "$FSAFE" write --batch --create-only \
		< <(printf 'a\0s1\0exists\0s2\0b\0missing-source\0c\0s2\0')
	[ "$(cat a)" = one ]
	[ "$(cat c)" = two ]
	[ "$(cat exists)" = keep ]
	[ ! -e b ]
	[[ "$output" == *"write exists: exists exists; exists unchanged"* ]] ||
	[[ "$output" == *"write exists: "*"File exists; exists unchanged"* ]]
	[[ "$output" == *"write b: open source: No such file or directory; b unchanged"* ]]
	assert_no_staging .
}

@test "unpaired input is a usage error and writes nothing" {
	printf 'x\n' > s
	run -2 "$FSAFE" write --batch < <(printf 'a\0s\0lonely\0')
	[ ! -e a ]
	[[ "$output" == *"TARGET\\0SOURCE\\0 pairs"* ]]
}

@test "--batch takes no FILE and no --root" {
	run -2 "$FSAFE" write --batch f < /dev/null
	run -2 "$FSAFE" write --batch --root . < /dev/null
}

@test "empty input writes nothing and succeeds" {
	"$FSAFE" write --batch < /dev/null
	[ -z "$(ls -A)" ]
}
