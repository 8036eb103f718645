#!/usr/bin/env bats
# fsafe write --root / fsafe sweep --root: paths that cannot leave a root.

load helpers

OLD=.fsafe-000000000000000000000001.tmp

# The world lives in w/, apart from bats' own files in the test directory.
setup() {
	cli_setup
	mkdir w && cd w
	mkdir r outside r/d
	echo outside > outside/victim
	echo x > "outside/$OLD"
	touch -d '2 hours ago' "outside/$OLD"
	echo sentinel > sentinel
	before=$(outside_picture)
}

# Everything beside the root: names, sizes, mtimes, bytes.
outside_picture() {
	find . -path ./r -prune -o -printf '%p %y %s %T@ %l\n' | sort
	cat sentinel outside/victim
}

assert_outside_unchanged() {
	local after
	after=$(outside_picture)
	if [ "$before" != "$after" ]; then
		diff <(echo "$before") <(echo "$after") >&2
		return 1
	fi
}

@test "write --root writes beneath the root" {
	echo hello | "$FSAFE" write --root r d/file
	[ "$(cat r/d/file)" = hello ]
	assert_no_staging r/d
	assert_outside_unchanged
}

@test "write --root --mkdir creates the directories inside" {
	echo deep | "$FSAFE" write --root r --mkdir a/b/c
	[ "$(cat r/a/b/c)" = deep ]
	assert_outside_unchanged
}

@test "write --root refuses '..' above the root and names it" {
	run --separate-stderr "$FSAFE" write --root r d/../../victim <<<"evil"
	[ "$status" -eq 1 ]
	[[ $stderr == *"'..'"* ]]
	[[ $stderr == *unchanged* ]]
	[ ! -e victim ]
	assert_outside_unchanged
}

@test "write --root refuses an absolute path" {
	run --separate-stderr "$FSAFE" write --root r "$PWD/outside/victim" \
		<<<"evil"
	[ "$status" -eq 1 ]
	[[ $stderr == *"absolute path"* ]]
	assert_outside_unchanged
}

@test "write --root refuses a symbolic link on the way and names it" {
	ln -s ../outside r/l
	run --separate-stderr "$FSAFE" write --root r l/victim <<<"evil"
	[ "$status" -eq 1 ]
	[[ $stderr == *"'l'"* ]]
	assert_outside_unchanged
	ln -s "$PWD/outside" r/abs
	run "$FSAFE" write --root r --mkdir abs/new <<<"evil"
	[ "$status" -eq 1 ]
	assert_outside_unchanged
}

@test "write --root: a link at FILE is refused, or replaced with --no-follow" {
	ln -s ../sentinel r/fl
	run "$FSAFE" write --root r fl <<<"evil"
	[ "$status" -eq 1 ]
	[ -L r/fl ]
	echo new | "$FSAFE" write --root r --no-follow fl
	[ ! -L r/fl ] && [ "$(cat r/fl)" = new ]
	assert_outside_unchanged
}

@test "write --root: a missing root fails before reading input" {
	run --separate-stderr "$FSAFE" write --root nowhere f <<<"x"
	[ "$status" -eq 1 ]
	[[ $stderr == *"--root nowhere"* ]]
}

@test "write --help documents --root" {
	run "$FSAFE" write --help
	[ "$status" -eq 0 ]
	[[ $output == *"--root DIR"* ]]
}

@test "sweep --root sweeps beneath the root, lists DIR/NAME" {
	echo x > "r/d/$OLD"
	touch -d '2 hours ago' "r/d/$OLD"
	run --separate-stderr "$FSAFE" sweep --root r --older-than 1h d
	[ "$status" -eq 0 ]
	[ "$output" = "d/$OLD" ]
	[ ! -e "r/d/$OLD" ]
	assert_outside_unchanged
}

@test "sweep --root never reaches outside: '..', absolute, links" {
	ln -s ../outside r/l
	run --separate-stderr "$FSAFE" sweep --root r --older-than 1h ../outside
	[ "$status" -eq 1 ]
	[[ $stderr == *"'..'"* ]]
	run "$FSAFE" sweep --root r --older-than 1h "$PWD/outside"
	[ "$status" -eq 1 ]
	run --separate-stderr "$FSAFE" sweep --root r --older-than 1h l
	[ "$status" -eq 1 ]
	[[ $stderr == *"'l'"* ]]
	[ -e "outside/$OLD" ]
	assert_outside_unchanged
}
