# Shared by the CLI's bats files: `load helpers` in each.
#
# FSAFE names the binary under test (CTest sets it); every test runs in its
# own empty directory, BATS_TEST_TMPDIR.

bats_require_minimum_version 1.5.0

cli_setup() {
	: "${FSAFE:?FSAFE must name the fsafe binary}"
	[ -x "$FSAFE" ] || { echo "not executable: $FSAFE" >&2; return 1; }
	cd "$BATS_TEST_TMPDIR"
	umask 022
	MOUNTED=()
}

# Fails (listing them) if directory $1 holds any staging file, as the
# library itself recognises them.
assert_no_staging() {
	local dir=$1 name found=()
	while IFS= read -r -d '' name; do
		name=${name##*/}
		if "$FSAFE" is-staging -- "$name"; then
			found+=("$name")
		fi
	done < <(find "$dir" -mindepth 1 -maxdepth 1 -print0)
	if [ "${#found[@]}" -ne 0 ]; then
		echo "staging files left in $dir: ${found[*]}" >&2
		return 1
	fi
}

# The names of the staging files in directory $1, one a line.
staging_names() {
	local name
	for name in "$1"/.* "$1"/*; do
		[ -e "$name" ] || [ -L "$name" ] || continue
		if "$FSAFE" is-staging -- "${name##*/}"; then
			echo "${name##*/}"
		fi
	done
}

# True when directory $1 holds a staging file.
has_staging() {
	[ -n "$(staging_names "$1")" ]
}

# Polls (bounded: about 10 s) until the command "$@" succeeds. Waiting on
# a condition rather than a fixed delay: slow machines wait longer, fast
# ones not at all.
wait_until() {
	local i
	for ((i = 0; i < 1000; i++)); do
		"$@" && return 0
		sleep 0.01
	done
	echo "timed out waiting for: $*" >&2
	return 1
}

# Size of the regular file that process $1 holds open inside directory $2,
# whether it has a name there or not (an O_TMPFILE stage); fails if none.
open_file_size() {
	local pid=$1 dir=$2 fd target
	for fd in /proc/"$pid"/fd/*; do
		target=$(readlink "$fd" 2>/dev/null) || continue
		[[ $target == "$dir"/* ]] || continue
		[ -f "$fd" ] || continue
		stat -L -c %s "$fd"
		return 0
	done
	return 1
}

# True when process $1 has staged exactly $3 bytes in directory $2.
has_staged() {
	local size
	size=$(open_file_size "$1" "$2") && [ "$size" -eq "$3" ]
}

# Mounts a tmpfs of $2 (e.g. 64k) on directory $1, or skips the test.
mount_tmpfs_or_skip() {
	[ "$(id -u)" -eq 0 ] || skip "needs root: mounts a tmpfs"
	mkdir -p "$1"
	mount -t tmpfs -o "size=$2" fsafe-cli-test "$1" 2>/dev/null ||
		skip "needs root: mount is not permitted here"
	MOUNTED+=("$1")
}

unmount_all() {
	local m
	for m in "${MOUNTED[@]}"; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
	MOUNTED=()
}
