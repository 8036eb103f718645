#!/usr/bin/env bats
# fsafe is-staging: the staging-name contract, as scripts see it.

load helpers

# Written out on purpose: the contract is public and must not drift.
VALID=.fsafe-0123456789abcdef01234567.tmp

setup() {
	cli_setup
}

@test "a valid staging name exits 0, silently" {
	run --separate-stderr "$FSAFE" is-staging "$VALID"
	[ "$status" -eq 0 ]
	[ -z "$output" ] && [ -z "$stderr" ]
}

@test "several valid names exit 0" {
	run "$FSAFE" is-staging "$VALID" .fsafe-ffffffffffffffffffffffff.tmp \
		.fsafe-000000000000000000000000.tmp
	[ "$status" -eq 0 ]
}

@test "each lookalike exits 1" {
	local n
	for n in .fsafe-0123456789ABCDEF01234567.tmp \
	         .fsafe-0123456789abcdef01234567.tmp.bak \
	         .fsafe-0123456789abcdef0123456.tmp \
	         .fsafe-0123456789abcdef012345678.tmp \
	         .fsafe-0123456789abcdef0123456g.tmp \
	         fsafe-0123456789abcdef01234567.tmp \
	         .fsafe-0123456789abcdef01234567.TMP \
	         .fsafe-0123456789abcdef01234567 \
	         "$VALID " " $VALID" \
	         "dir/$VALID" "./$VALID" \
	         .lock-123e4567-e89b-12d3-a456-426614174000.tmp \
	         .fsafe--123456789abcdef01234567.tmp \
	         "" . ..; do
		run --separate-stderr "$FSAFE" is-staging -- "$n"
		[ "$status" -eq 1 ] && [ -z "$output" ] && [ -z "$stderr" ] ||
			{ echo "'$n': status $status" >&2; return 1; }
	done
}

@test "one lookalike among valid names exits 1" {
	run "$FSAFE" is-staging "$VALID" x.tmp "$VALID"
	[ "$status" -eq 1 ]
}

@test "-v prints a verdict for each name" {
	run --separate-stderr "$FSAFE" is-staging -v "$VALID" x.tmp
	[ "$status" -eq 1 ]
	[ "$output" = "$(printf 'staging %s\nother x.tmp' "$VALID")" ]
}

dir_not_empty() {
	[ -n "$(ls -A "$1")" ]
}

@test "the names the writer itself stages satisfy the predicate" {
	mkdir w
	mkfifo in
	"$FSAFE" write --no-tmpfile w/f < in &
	local pid=$! feed
	exec {feed}> in
	# Any entry at all is the stage: w/ is otherwise empty.
	wait_until dir_not_empty w
	local stage
	stage=$(ls -A w)
	exec {feed}>&-
	wait "$pid"
	"$FSAFE" is-staging "$stage"
}

@test "usage errors exit 2" {
	run --separate-stderr "$FSAFE" is-staging
	[ "$status" -eq 2 ]
	[[ $stderr == *"usage: fsafe is-staging"* ]]
	run --separate-stderr "$FSAFE" is-staging --bogus "$VALID"
	[ "$status" -eq 2 ]
	[[ $stderr == *"usage: fsafe is-staging"* ]]
}

@test "--help prints the usage on stdout and exits 0" {
	run --separate-stderr "$FSAFE" is-staging --help
	[ "$status" -eq 0 ]
	[[ $output == "usage: fsafe is-staging"* ]]
	[ -z "$stderr" ]
}
