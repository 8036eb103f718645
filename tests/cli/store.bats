#!/usr/bin/env bats
# fsafe store: put/get/del/ls/update, versions, leftovers, concurrency.

load helpers

setup() {
	cli_setup
	"$FSAFE" store --create s ls
}

@test "put from standard input, a file or -; get returns the bytes" {
	printf 'hello\n' | "$FSAFE" store s put greeting
	head -c 3000 /dev/urandom > blob
	"$FSAFE" store s put blob blob
	printf 'dash' | "$FSAFE" store s put d -
	run "$FSAFE" store s get greeting
	[ "$status" -eq 0 ]
	[ "$output" = hello ]
	"$FSAFE" store s get blob > out
	cmp blob out
	[ "$("$FSAFE" store s get d)" = dash ]
	assert_no_staging s
}

@test "ls lists the keys sorted; -l adds version and length; -0 separates by NUL" {
	for k in b a C 'with space' a/b; do
		printf '%s' "$k" | "$FSAFE" store s put "$k"
	done
	printf 'again' | "$FSAFE" store s put a
	run "$FSAFE" store s ls
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'C\na\na/b\nb\nwith space')" ]
	run "$FSAFE" store -l s ls
	[ "${lines[1]}" = "2 5 a" ]
	[ "${lines[0]}" = "1 1 C" ]
	[ "$("$FSAFE" store -0 s ls | tr '\0' '|')" = "C|a|a/b|b|with space|" ]
}

@test "del removes a key; a missing key fails with exit 1" {
	echo x | "$FSAFE" store s put k
	"$FSAFE" store s del k
	run --separate-stderr "$FSAFE" store s get k
	[ "$status" -eq 1 ]
	[[ $stderr == *"get k: no such key"* ]]
	run "$FSAFE" store s del k
	[ "$status" -eq 1 ]
	[ -z "$("$FSAFE" store s ls)" ]
}

@test "update filters the old value into the new under the lock" {
	echo 41 | "$FSAFE" store s put n
	"$FSAFE" store s update n -- sh -c 'read x; echo $((x + 1))'
	[ "$("$FSAFE" store s get n)" = 42 ]
	# A key with no record: empty input, FSAFE_STORE_EXISTS=0.
	"$FSAFE" store s update fresh -- sh -c 'cat; echo "exists=$FSAFE_STORE_EXISTS"'
	[ "$("$FSAFE" store s get fresh)" = exists=0 ]
	"$FSAFE" store s update fresh -- sh -c 'cat >/dev/null; echo "exists=$FSAFE_STORE_EXISTS"'
	[ "$("$FSAFE" store s get fresh)" = exists=1 ]
}

@test "update: a failing command changes nothing and exits 1" {
	echo keep | "$FSAFE" store s put k
	run --separate-stderr "$FSAFE" store s update k -- sh -c 'echo garbage; exit 3'
	[ "$status" -eq 1 ]
	[[ $stderr == *"exited with status 3; unchanged"* ]]
	[ "$("$FSAFE" store s get k)" = keep ]
	run "$FSAFE" store s update k -- ./no-such-command
	[ "$status" -eq 1 ]
	[ "$("$FSAFE" store -l s ls)" = "1 5 k" ]
	assert_no_staging s
}

@test "--if-version: a stale version is refused and changes nothing" {
	echo one | "$FSAFE" store s put k
	echo two | "$FSAFE" store --if-version 1 s put k
	run --separate-stderr "$FSAFE" store --if-version 1 s put k <<<"three"
	[ "$status" -eq 1 ]
	[[ $stderr == *"version changed"* ]]
	[ "$("$FSAFE" store s get k)" = two ]
	run "$FSAFE" store --if-version 0 s put k <<<"new"
	[ "$status" -eq 1 ]
	echo new | "$FSAFE" store --if-version 0 s put other
	[ "$("$FSAFE" store s get other)" = new ]
}

@test "leftovers, foreign files, directories and symlinks wedge nothing" {
	echo a | "$FSAFE" store s put a
	echo b | "$FSAFE" store s put b
	# What crashed writers and people leave behind.
	echo partial > s/.fsafe-0123456789abcdef01234567.tmp
	"$FSAFE" is-staging .fsafe-0123456789abcdef01234567.tmp
	echo 'pid 1' > s/.lock-0b1e2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.tmp
	echo notes > s/README
	mkdir s/sub s/k-7a
	ln -s k-61 s/link
	echo outside > outside
	ln -s ../outside s/k-79
	run --separate-stderr "$FSAFE" store s ls
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'a\nb')" ]
	# Only what sits at a key's name costs a key: reported as damage.
	[[ $stderr == *"k-79: damaged record skipped: not a regular file"* ]]
	[[ $stderr == *"k-7a: damaged record skipped: not a regular file"* ]]
	[[ $stderr == *"2 damaged records skipped"* ]]
	[[ $stderr != *README* && $stderr != *sub* && $stderr != *link* ]]
	run --separate-stderr "$FSAFE" store -v s ls
	[ "$output" = "$(printf 'a\nb')" ]
	[[ $stderr == *"README: not a record (unknown name)"* ]]
	[[ $stderr == *"sub: not a record (directory)"* ]]
	[[ $stderr == *"link: not a record (symbolic link)"* ]]
	echo c | "$FSAFE" store s put c
	"$FSAFE" store s update a -- sh -c 'cat; echo more'
	"$FSAFE" store s del b
	[ "$("$FSAFE" store s get a)" = "$(printf 'a\nmore')" ]
	# A symlink under a key's name is replaced, never followed.
	echo y | "$FSAFE" store s put y
	[ "$(cat outside)" = outside ]
	[ "$("$FSAFE" store s ls | tr '\n' ' ')" = "a c y " ]
}

@test "an invalid record is reported by ls and fails only its own key" {
	echo good | "$FSAFE" store s put good
	echo bad | "$FSAFE" store s put bad
	truncate -s 10 s/k-626164
	run --separate-stderr "$FSAFE" store s ls
	[ "$status" -eq 0 ]
	[ "$output" = good ]
	[[ $stderr == *"k-626164: invalid record skipped"* ]]
	run "$FSAFE" store s get bad
	[ "$status" -eq 1 ]
	[ "$("$FSAFE" store s get good)" = good ]
	echo fixed | "$FSAFE" store s put bad
	[ "$("$FSAFE" store s get bad)" = fixed ]
}

@test "concurrent updaters lose no increment" {
	echo 0 | "$FSAFE" store s put n
	local pids=() i
	for i in 1 2 3 4; do
		(for j in $(seq 25); do
			"$FSAFE" store s update n -- sh -c 'read x; echo $((x + 1))' || exit 1
		done) &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	[ "$("$FSAFE" store s get n)" = 100 ]
	[ "$("$FSAFE" store -l s ls)" = "101 4 n" ]
}

@test "key and usage errors" {
	run "$FSAFE" store s put "$(printf 'x%.0s' $(seq 127))" </dev/null
	[ "$status" -eq 1 ]
	run "$FSAFE" store s put "" </dev/null
	[ "$status" -eq 1 ]
	run "$FSAFE" store s
	[ "$status" -eq 2 ]
	run "$FSAFE" store s frobnicate
	[ "$status" -eq 2 ]
	run "$FSAFE" store s update k true
	[ "$status" -eq 2 ]
	run "$FSAFE" store --if-version x s put k
	[ "$status" -eq 2 ]
	run "$FSAFE" store missing ls
	[ "$status" -eq 1 ]
	run "$FSAFE" store --help
	[ "$status" -eq 0 ]
	[[ $output == *"update KEY -- COMMAND"* ]]
}

# ---- damage (issue 16) -------------------------------------------------------

@test "check is clean on a healthy store and changes nothing" {
	echo one | "$FSAFE" store s put a
	echo two | "$FSAFE" store s put b
	before=$(ls -laR --time-style=full-iso s)
	run "$FSAFE" store s check
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[ "$(ls -laR --time-style=full-iso s)" = "$before" ]
}

@test "a damaged record costs its key alone: get, ls and check report it, repair quarantines it" {
	echo one | "$FSAFE" store s put a
	echo two | "$FSAFE" store s put b
	printf 'XX' | dd of=s/k-61 bs=1 seek=38 conv=notrunc 2>/dev/null
	run "$FSAFE" store s get a
	[ "$status" -eq 1 ]
	[[ "$output" == *"get a: damaged record"* ]]
	[ "$("$FSAFE" store s get b)" = two ]
	run "$FSAFE" store s ls
	[ "$status" -eq 0 ]
	[[ "$output" == *"1 damaged record skipped"* ]]
	[[ "${lines[-1]}" == b ]]
	before=$(ls -laR --time-style=full-iso s)
	run "$FSAFE" store s check
	[ "$status" -eq 1 ]
	[ "$output" = "k-61: payload cut short or checksum mismatch" ]
	[ "$(ls -laR --time-style=full-iso s)" = "$before" ]
	run "$FSAFE" store s repair
	[ "$status" -eq 0 ]
	[ "$output" = "k-61: payload cut short or checksum mismatch: quarantined as quarantine/k-61" ]
	[ -f s/quarantine/k-61 ] && [ -f s/quarantine/k-61.reason ]
	run "$FSAFE" store s check
	[ "$status" -eq 0 ]
	[ "$("$FSAFE" store s ls)" = b ]
}

@test "FIFO, symlink, copy from another key and stray entries are damage; nothing is followed or blocks" {
	echo one | "$FSAFE" store s put a
	echo secret > outside
	mkfifo s/k-62
	ln -s ../outside s/k-63
	cp s/k-61 s/k-64
	echo junk > s/k-zz
	run timeout 10 "$FSAFE" store s get b
	[ "$status" -eq 1 ]
	run timeout 10 "$FSAFE" store s get c
	[ "$status" -eq 1 ]
	[[ "$output" != *secret* ]]
	run timeout 10 "$FSAFE" store s check
	[ "$status" -eq 1 ]
	[ "$output" = "$(printf '%s\n' \
		'k-62: not a regular file (FIFO)' \
		'k-63: not a regular file (symbolic link)' \
		'k-64: key does not match its name' \
		"k-zz: stray entry: not a key's name")" ]
	run timeout 10 "$FSAFE" store s repair
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 4 ]
	[ "$(cat outside)" = secret ]
	[ "$("$FSAFE" store s ls)" = a ]
	[ "$("$FSAFE" store s get a)" = one ]
}

@test "a .lock that is a symlink or a FIFO is never followed: changes fail naming it until repair" {
	echo one | "$FSAFE" store s put a
	mkdir elsewhere
	rm -rf s/.lock
	ln -s ../elsewhere s/.lock
	run timeout 10 "$FSAFE" store s put b
	[ "$status" -eq 1 ]
	[[ "$output" == *".lock: not a directory (symbolic link)"* ]]
	[ -z "$(ls -A elsewhere)" ]
	run "$FSAFE" store s repair
	[ "$status" -eq 0 ]
	[ "$output" = ".lock: not a directory (symbolic link): quarantined as quarantine/.lock" ]
	echo two | "$FSAFE" store s put b
	[ "$("$FSAFE" store s get b)" = two ]
	rm s/.lock/lock
	mkfifo s/.lock/lock
	run timeout 10 "$FSAFE" store s put c
	[ "$status" -eq 1 ]
	[[ "$output" == *".lock/lock: not a regular file (FIFO)"* ]]
	run "$FSAFE" store s repair
	[ "$output" = ".lock/lock: not a regular file (FIFO): quarantined as .lock/quarantine/lock" ]
	echo three | "$FSAFE" store s put c
	[ "$("$FSAFE" store s get a)" = one ]
}

@test "check on a missing store exits 2" {
	run "$FSAFE" store nowhere check
	[ "$status" -eq 2 ]
}

@test "a quarantine that is not a directory is itself quarantined; nothing blocks on it" {
	echo one | "$FSAFE" store s put a
	mkfifo s/quarantine
	mkfifo s/k-62
	run timeout 10 "$FSAFE" store s ls
	[ "$status" -eq 0 ]
	run timeout 10 "$FSAFE" store s check
	[ "$status" -eq 1 ]
	[ "${lines[0]}" = "quarantine: not a directory (FIFO)" ]
	run timeout 10 "$FSAFE" store s repair
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "quarantine: not a directory (FIFO): moved into a new quarantine/" ]
	[ -p s/quarantine/quarantine.damaged ] && [ -p s/quarantine/k-62 ]
	run "$FSAFE" store s check
	[ "$status" -eq 0 ]
	[ "$("$FSAFE" store s get a)" = one ]
}
