#!/usr/bin/env bats
# fsafe write: content, options, failures and interruption.

load helpers

setup() {
	cli_setup
}

teardown() {
	if [ -n "${WRITER_PID:-}" ]; then
		kill -KILL "$WRITER_PID" 2>/dev/null || true
		wait "$WRITER_PID" 2>/dev/null || true
	fi
	unmount_all
}

@test "binary data round-trips byte for byte" {
	{ head -c 300000 /dev/urandom; printf '\0\0\n\r\377'; } > src
	"$FSAFE" write dst < src
	cmp src dst
}

@test "empty input makes an empty file" {
	echo old > f
	"$FSAFE" write f < /dev/null
	[ -f f ] && [ ! -s f ]
}

@test "input larger than one chunk, through a pipe" {
	seq 1 200000 > expected
	seq 1 200000 | "$FSAFE" write f
	cmp expected f
}

@test "sort f | fsafe write f sorts in place" {
	printf 'pear\napple\nfig\n' > f
	sort f | "$FSAFE" write f
	printf 'apple\nfig\npear\n' > expected
	cmp expected f
}

@test "replacing leaves nothing behind in the directory" {
	echo old > f
	echo new | "$FSAFE" write f
	[ "$(cat f)" = new ]
	[ "$(ls -A | sort | tr '\n' ' ')" = "f " ]
}

@test "--mode sets a new file's permissions, less the umask" {
	echo x | "$FSAFE" write --mode 640 a
	[ "$(stat -c %a a)" = 640 ]
	echo x | "$FSAFE" write --mode 666 b
	[ "$(stat -c %a b)" = 644 ]
	echo x | "$FSAFE" write -m 0600 c
	[ "$(stat -c %a c)" = 600 ]
}

@test "a new file without --mode gets 666 less the umask" {
	echo x | "$FSAFE" write f
	[ "$(stat -c %a f)" = 644 ]
}

@test "an existing file keeps its mode, whatever --mode says" {
	echo old > f
	chmod 604 f
	echo new | "$FSAFE" write f
	[ "$(stat -c %a f)" = 604 ]
	echo newer | "$FSAFE" write --mode 600 f
	[ "$(stat -c %a f)" = 604 ]
	[ "$(cat f)" = newer ]
}

@test "--create-only creates a missing file" {
	echo new | "$FSAFE" write --create-only f
	[ "$(cat f)" = new ]
}

@test "--create-only on an existing file fails and leaves it byte-identical" {
	printf 'old\0content' > f
	cp f f.orig
	chmod 640 f
	run --separate-stderr "$FSAFE" write --create-only f <<<"new"
	[ "$status" -eq 1 ]
	[ -z "$output" ]
	[[ $stderr == "fsafe: write f: "*"exists"*"unchanged" ]]
	cmp f.orig f
	[ "$(stat -c %a f)" = 640 ]
	assert_no_staging .
}

@test "--mkdir creates missing parent directories" {
	echo deep | "$FSAFE" write --mkdir a/b/c/f
	[ "$(cat a/b/c/f)" = deep ]
	echo again | "$FSAFE" write -p a/b/c/f
	[ "$(cat a/b/c/f)" = again ]
}

@test "a missing parent without --mkdir: exit 1, naming the file and step" {
	run --separate-stderr "$FSAFE" write a/b/f <<<"x"
	[ "$status" -eq 1 ]
	[ "$stderr" = "fsafe: write a/b/f: open directory: No such file or directory; a/b/f unchanged" ]
	[ ! -e a ]
}

@test "through a symlink, the default writes the link's target" {
	echo old > target
	ln -s target link
	echo new | "$FSAFE" write link
	[ -L link ]
	[ "$(readlink link)" = target ]
	[ "$(cat target)" = new ]
}

@test "through a chain of symlinks into another directory" {
	mkdir sub
	echo old > sub/target
	ln -s sub/target hop
	ln -s hop link
	echo new | "$FSAFE" write link
	[ -L link ] && [ -L hop ]
	[ "$(cat sub/target)" = new ]
	assert_no_staging .
	assert_no_staging sub
}

@test "--no-follow replaces the symlink itself" {
	echo old > target
	ln -s target link
	echo new | "$FSAFE" write --no-follow link
	[ ! -L link ]
	[ "$(cat link)" = new ]
	[ "$(cat target)" = old ]
}

@test "--no-follow --create-only refuses even a dangling symlink" {
	ln -s nowhere link
	run "$FSAFE" write --no-follow --create-only link <<<"x"
	[ "$status" -eq 1 ]
	[ "$(readlink link)" = nowhere ]
	[ ! -e nowhere ]
}

@test "--no-sync writes the content" {
	echo old > f
	seq 1 1000 > expected
	"$FSAFE" write --no-sync f < expected
	cmp expected f
}

@test "--no-tmpfile writes the content and leaves no staging file" {
	echo old > f
	seq 1 1000 > expected
	"$FSAFE" write --no-tmpfile f < expected
	cmp expected f
	assert_no_staging .
}

@test "a directory as FILE: exit 1, untouched" {
	mkdir d
	run --separate-stderr "$FSAFE" write d <<<"x"
	[ "$status" -eq 1 ]
	[[ $stderr == "fsafe: write d: "*"Is a directory; d unchanged" ]]
	[ -d d ]
}

@test "unreadable standard input: exit 1, file unchanged" {
	echo old > f
	run --separate-stderr "$FSAFE" write f < .
	[ "$status" -eq 1 ]
	[ "$stderr" = "fsafe: write f: reading standard input: Is a directory; f unchanged" ]
	[ "$(cat f)" = old ]
	assert_no_staging .
}

@test "closed standard input: exit 1, file unchanged" {
	echo old > f
	# Not through `run`: its output pipe would take descriptor 0.
	local status=0
	"$FSAFE" write --no-tmpfile f <&- 2> stderr || status=$?
	[ "$status" -eq 1 ]
	[ "$(cat stderr)" = "fsafe: write f: reading standard input: Bad file descriptor; f unchanged" ]
	[ "$(cat f)" = old ]
	assert_no_staging .
}

@test "usage errors exit 2 with the usage on stderr" {
	local args
	for args in "" "--bogus f" "-x f" "a b" "--mode" "--mode 8 f" \
	            "--mode 0 f" "--mode 17777 f" "--mode= f" "--mode -1 f" \
	            "--mode u+x f"; do
		run --separate-stderr "$FSAFE" write $args </dev/null
		if [ "$status" -ne 2 ] || [ -n "$output" ] ||
		   [[ $stderr != *"usage: fsafe write"* ]]; then
			echo "args '$args': status $status, stderr: $stderr" >&2
			return 1
		fi
	done
	[ ! -e f ] && [ ! -e a ] && [ ! -e b ]
}

@test "--help prints the usage on stdout and exits 0" {
	run --separate-stderr "$FSAFE" write --help
	[ "$status" -eq 0 ]
	[[ $output == "usage: fsafe write"* ]]
	[ -z "$stderr" ]
}

# Starts `fsafe write [opts] w/f` reading a FIFO with the signals at their
# defaults (a background job of a script would otherwise ignore SIGINT),
# feeds it part of its input and waits until that part is staged. Only the
# target lives in w/, so the one file the writer holds open there is its
# stage.
start_interruptible_writer() {
	mkdir -p w
	mkfifo in
	env --default-signal=INT,TERM,HUP,PIPE \
		"$FSAFE" write "$@" w/f < in 2> stderr &
	WRITER_PID=$!
	exec {FEED}> in
	printf 'partial' >&"$FEED"
	wait_until has_staged "$WRITER_PID" "$PWD/w" 7
}

# Interrupts that writer with signal $1 and checks the outcome.
interrupt_and_check() {
	local sig=$1 num status=0
	num=$(kill -l "$sig")
	kill -s "$sig" "$WRITER_PID"
	wait "$WRITER_PID" || status=$?
	WRITER_PID=
	exec {FEED}>&-
	[ "$status" -eq $((128 + num)) ] ||
		{ echo "exit status $status, wanted $((128 + num))" >&2; return 1; }
	cmp f.orig w/f
	assert_no_staging w
	[ ! -s stderr ]
}

interrupt_test() {
	mkdir w
	printf 'old content\n' > w/f
	cp w/f f.orig
	start_interruptible_writer "${@:2}"
	interrupt_and_check "$1"
}

@test "SIGTERM while reading: file unchanged, no staging file, status 143" {
	interrupt_test TERM
}

@test "SIGINT while reading: file unchanged, no staging file, status 130" {
	interrupt_test INT
}

@test "SIGHUP while reading: file unchanged, no staging file, status 129" {
	interrupt_test HUP
}

@test "SIGPIPE while reading: file unchanged, no staging file, status 141" {
	interrupt_test PIPE
}

@test "SIGTERM with a named staging file (--no-tmpfile): it is removed" {
	mkdir w
	printf 'old content\n' > w/f
	cp w/f f.orig
	start_interruptible_writer --no-tmpfile
	# The stage is visible, so a missing cleanup would show.
	[ "$(staging_names w | wc -l)" -eq 1 ]
	interrupt_and_check TERM
}

@test "SIGINT with a named staging file on a new file: nothing appears" {
	start_interruptible_writer --no-tmpfile --create-only
	[ "$(staging_names w | wc -l)" -eq 1 ]
	local status=0
	kill -INT "$WRITER_PID"
	wait "$WRITER_PID" || status=$?
	WRITER_PID=
	exec {FEED}>&-
	[ "$status" -eq 130 ]
	[ -z "$(ls -A w)" ]
}

@test "a signal ignored on entry (nohup) stays ignored" {
	mkdir w
	mkfifo in
	env --ignore-signal=HUP "$FSAFE" write w/f < in 2> stderr &
	WRITER_PID=$!
	exec {FEED}> in
	printf 'partial' >&"$FEED"
	wait_until has_staged "$WRITER_PID" "$PWD/w" 7
	kill -HUP "$WRITER_PID"
	printf ' rest' >&"$FEED"
	# Staged after the signal: the writer is still reading.
	wait_until has_staged "$WRITER_PID" "$PWD/w" 12
	exec {FEED}>&-
	wait "$WRITER_PID"
	WRITER_PID=
	[ "$(cat w/f)" = "partial rest" ]
}

@test "the input's end, not a signal, commits: writer after a FIFO closes" {
	mkdir w
	printf 'old\n' > w/f
	start_interruptible_writer --no-tmpfile
	printf ' and the rest\n' >&"$FEED"
	exec {FEED}>&-
	wait "$WRITER_PID"
	WRITER_PID=
	[ "$(cat w/f)" = "partial and the rest" ]
	assert_no_staging w
}

@test "full disk: exit 1, No space left on device, old content intact" {
	mount_tmpfs_or_skip mnt 64k
	printf 'old content\n' > mnt/f
	cp mnt/f f.orig
	run --separate-stderr "$FSAFE" write mnt/f < <(head -c 1000000 /dev/zero)
	[ "$status" -eq 1 ]
	[[ $stderr == "fsafe: write mnt/f: "*": No space left on device; mnt/f unchanged" ]]
	cmp f.orig mnt/f
	assert_no_staging mnt
}

@test "full disk with a named stage (--no-tmpfile): no staging left" {
	mount_tmpfs_or_skip mnt 64k
	printf 'old content\n' > mnt/f
	cp mnt/f f.orig
	run --separate-stderr "$FSAFE" write --no-tmpfile mnt/f < <(head -c 1000000 /dev/zero)
	[ "$status" -eq 1 ]
	[[ $stderr == "fsafe: write mnt/f: write: No space left on device; mnt/f unchanged" ]]
	cmp f.orig mnt/f
	assert_no_staging mnt
}

@test "read-only filesystem: exit 1, naming the failed step" {
	mount_tmpfs_or_skip mnt 64k
	printf 'old content\n' > mnt/f
	cp mnt/f f.orig
	mount -o remount,ro mnt
	run --separate-stderr "$FSAFE" write mnt/f <<<"new"
	[ "$status" -eq 1 ]
	[[ $stderr =~ ^"fsafe: write mnt/f: "[a-z\ ]+": Read-only file system; mnt/f unchanged"$ ]]
	cmp f.orig mnt/f
}
