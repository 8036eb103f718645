#!/usr/bin/env bats
# fsafe sweep: what goes, what stays, output forms, durations, errors.

load helpers

# Staging names are written out here on purpose: the test pins the public
# contract rather than asking the library what it is.
OLD1=.fsafe-000000000000000000000001.tmp
OLD2=.fsafe-abcdef0123456789abcdef01.tmp
YOUNG=.fsafe-0123456789abcdef01234567.tmp

setup() {
	cli_setup
	mkdir d
	echo x > "d/$OLD1"
	echo x > "d/$OLD2"
	touch -d '2 hours ago' "d/$OLD1" "d/$OLD2"
	echo x > "d/$YOUNG"
	echo keep > d/data
	touch -d '2 hours ago' d/data
}

teardown() {
	if [ -n "${WRITER_PID:-}" ]; then
		kill -KILL "$WRITER_PID" 2>/dev/null || true
		wait "$WRITER_PID" 2>/dev/null || true
	fi
}

@test "old staging files are removed and printed as DIR/NAME" {
	run --separate-stderr "$FSAFE" sweep --older-than 1h d
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	[ "$(sort <<<"$output")" = "$(printf 'd/%s\nd/%s' "$OLD1" "$OLD2")" ]
	[ ! -e "d/$OLD1" ] && [ ! -e "d/$OLD2" ]
	[ -e "d/$YOUNG" ] && [ -e d/data ]
}

@test "young staging files are kept" {
	run "$FSAFE" sweep --older-than 3h d
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[ -e "d/$OLD1" ] && [ -e "d/$OLD2" ] && [ -e "d/$YOUNG" ]
}

@test "--dry-run prints what would go and removes nothing" {
	run --separate-stderr "$FSAFE" sweep --dry-run --older-than 1h d
	[ "$status" -eq 0 ]
	[ "$(sort <<<"$output")" = "$(printf 'd/%s\nd/%s' "$OLD1" "$OLD2")" ]
	[ -e "d/$OLD1" ] && [ -e "d/$OLD2" ] && [ -e "d/$YOUNG" ]
}

@test "-0 ends each name with NUL" {
	"$FSAFE" sweep -0 --older-than 1h d > out
	printf 'd/%s\0d/%s\0' "$OLD1" "$OLD2" > expected
	sort -z out | cmp expected -
}

@test "a trailing slash on DIR is not doubled" {
	rm "d/$OLD2"
	run "$FSAFE" sweep --older-than 1h d/
	[ "$status" -eq 0 ]
	[ "$output" = "d/$OLD1" ]
}

@test "lookalikes are kept, however old" {
	mkdir e
	local names=(
		.fsafe-ABCDEF0123456789ABCDEF01.tmp
		.fsafe-000000000000000000000001.tmp.bak
		.fsafe-00000000000000000000001.tmp
		.fsafe-0000000000000000000000001.tmp
		.fsafe-00000000000000000000000g.tmp
		fsafe-000000000000000000000001.tmp
		.fsafe-000000000000000000000001.TMP
		.lock-123e4567-e89b-12d3-a456-426614174000.tmp
	)
	local n
	for n in "${names[@]}"; do
		echo x > "e/$n"
	done
	mkfifo "e/$OLD1"
	mkdir "e/$OLD2"
	touch -h -d '2 hours ago' e/* e/.[!.]*
	run --separate-stderr "$FSAFE" sweep --older-than 1s e
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	for n in "${names[@]}"; do
		[ -f "e/$n" ]
	done
	[ -p "e/$OLD1" ] && [ -d "e/$OLD2" ]
}

# What a crashed `fsafe symlink` leaves: a symbolic link with a staging
# name. Its own age counts; what it points to is never touched.
@test "old staging-named symlinks are removed, their targets kept" {
	mkdir l outside
	echo old > l/old-file
	echo fresh > l/fresh-file
	mkdir l/dir
	echo in > l/dir/inside
	echo out > outside/secret
	touch -d '2 hours ago' l/old-file
	ln -s old-file "l/$OLD1"
	ln -s dir "l/$OLD2"
	ln -s "$PWD/outside/secret" l/.fsafe-000000000000000000000003.tmp
	ln -s fresh-file l/.fsafe-000000000000000000000004.tmp
	touch -h -d '2 hours ago' l/.fsafe-*
	ln -s old-file "l/$YOUNG"
	run --separate-stderr "$FSAFE" sweep --dry-run --older-than 1h l
	[ "$status" -eq 0 ]
	[ "$(wc -l <<<"$output")" -eq 4 ]
	[ -L "l/$OLD1" ]
	run --separate-stderr "$FSAFE" sweep --older-than 1h l
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	[ "$(sort <<<"$output")" = "$(printf 'l/%s\n' \
		.fsafe-000000000000000000000003.tmp \
		.fsafe-000000000000000000000004.tmp "$OLD1" "$OLD2" | sort)" ]
	[ -L "l/$YOUNG" ]
	[ "$(ls -A l | sort)" = "$(printf '%s\n' "$YOUNG" dir fresh-file old-file | sort)" ]
	[ "$(cat l/old-file)" = old ] && [ "$(cat l/fresh-file)" = fresh ]
	[ "$(cat l/dir/inside)" = in ] && [ "$(cat outside/secret)" = out ]
}

@test "a stage left by a killed fsafe symlink is swept" {
	ln -s release-41 current
	# Killed between its symlinkat and its rename: only the stage exists.
	ln -s release-42 .fsafe-00000000000000000000abcd.tmp
	touch -h -d '2 hours ago' .fsafe-00000000000000000000abcd.tmp
	run "$FSAFE" sweep --older-than 1h .
	[ "$status" -eq 0 ]
	[ "$output" = ./.fsafe-00000000000000000000abcd.tmp ]
	assert_no_staging .
	[ "$(readlink current)" = release-41 ]
	"$FSAFE" symlink release-42 current
	[ "$(readlink current)" = release-42 ]
	assert_no_staging .
}

@test "a live writer's old staging file is kept" {
	mkdir w
	mkfifo in
	"$FSAFE" write --no-tmpfile w/f < in &
	WRITER_PID=$!
	exec {FEED}> in
	# Staged input means the writer is past its open, lock included.
	printf 'x' >&"$FEED"
	wait_until has_staged "$WRITER_PID" "$PWD/w" 1
	local stage
	stage=$(staging_names w)
	touch -d '2 hours ago' "w/$stage"
	run "$FSAFE" sweep --older-than 1h w
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[ -e "w/$stage" ]
	# The writer still commits afterwards.
	printf 'done' >&"$FEED"
	exec {FEED}>&-
	wait "$WRITER_PID"
	WRITER_PID=
	[ "$(cat w/f)" = xdone ]
	assert_no_staging w
}

@test "several DIRs: each swept; a failing one gives exit 1 and a message" {
	mkdir e
	echo x > "e/$OLD1"
	touch -d '2 hours ago' "e/$OLD1"
	run --separate-stderr "$FSAFE" sweep --older-than 1h d missing e
	[ "$status" -eq 1 ]
	[ "$stderr" = "fsafe: sweep missing: No such file or directory" ]
	[ "$(sort <<<"$output")" = "$(printf 'd/%s\nd/%s\ne/%s' "$OLD1" "$OLD2" "$OLD1")" ]
	[ ! -e "e/$OLD1" ]
}

@test "a DIR that is a file: exit 1" {
	run --separate-stderr "$FSAFE" sweep --older-than 1h d/data
	[ "$status" -eq 1 ]
	[ "$stderr" = "fsafe: sweep d/data: Not a directory" ]
}

@test "durations: every unit, and a bare number counts seconds" {
	# The old files are 2 h (7200 s) old.
	local keep go
	for keep in 3h 180m 10800s 10800 10800000ms 1d; do
		run "$FSAFE" sweep --dry-run --older-than "$keep" d
		[ "$status" -eq 0 ] && [ -z "$output" ] ||
			{ echo "$keep: status $status, output $output" >&2; return 1; }
	done
	for go in 1h 90m 5400s 5400 5400000ms 0 0s; do
		run "$FSAFE" sweep --dry-run --older-than "$go" d
		[ "$status" -eq 0 ] && [ "$(wc -l <<<"$output")" -ge 2 ] ||
			{ echo "$go: status $status, output $output" >&2; return 1; }
	done
}

@test "bad durations exit 2 and remove nothing" {
	local bad
	for bad in "" " 1h" "1h " "-1h" "+1h" "1.5h" "1 h" "h" "1y" "1hh" \
	           "1H" "1h30m" "0x10" "9223372036854775808ms" \
	           "9223372036854776s" "99999999999999999999" "106751991168d"; do
		run --separate-stderr "$FSAFE" sweep --older-than "$bad" d
		[ "$status" -eq 2 ] && [[ $stderr == *"usage: fsafe sweep"* ]] ||
			{ echo "'$bad': status $status" >&2; return 1; }
	done
	[ -e "d/$OLD1" ] && [ -e "d/$OLD2" ]
}

@test "the largest duration is accepted" {
	run "$FSAFE" sweep --older-than 9223372036854775807ms d
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[ -e "d/$OLD1" ]
}

@test "usage errors exit 2" {
	local args
	for args in "" "d" "--older-than 1h" "--older-than" "--bogus d" \
	            "-x --older-than 1h d"; do
		run --separate-stderr "$FSAFE" sweep $args
		[ "$status" -eq 2 ] && [ -z "$output" ] &&
		[[ $stderr == *"usage: fsafe sweep"* ]] ||
			{ echo "'$args': status $status" >&2; return 1; }
	done
	[ -e "d/$OLD1" ]
}

@test "--help prints the usage on stdout and exits 0" {
	run --separate-stderr "$FSAFE" sweep --help
	[ "$status" -eq 0 ]
	[[ $output == "usage: fsafe sweep"* ]]
	[ -z "$stderr" ]
}
