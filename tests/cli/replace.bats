#!/usr/bin/env bats
# fsafe write keeps what the old file was (extended attributes, ACLs, its
# type, its links), fsafe stat-token with write --if-unchanged, and
# fsafe symlink. Attribute tests run on an ext4 and an xfs loop mount.

load helpers

setup() {
	cli_setup
}

teardown() {
	unmount_all
}

# Mounts a fresh $2 (ext4 or xfs) loop filesystem on directory $1, or skips.
mount_loop_or_skip() {
	[ "$(id -u)" -eq 0 ] || skip "needs root: mounts a loop filesystem"
	command -v "mkfs.$2" >/dev/null || skip "needs mkfs.$2"
	mkdir -p "$1"
	truncate -s 300M "$1.img"
	local opts=-F
	[ "$2" = xfs ] && opts=-f
	[ "$2" = ext4 ] && opts="-F -b 4096"
	# shellcheck disable=SC2086
	mkfs."$2" -q $opts "$1.img" >/dev/null 2>&1 || skip "mkfs.$2 failed"
	mount -o loop "$1.img" "$1" 2>/dev/null ||
		skip "needs root: loop mounts are not permitted here"
	MOUNTED+=("$1")
}

# Every attribute of $1, ACLs included, values in hex.
attrs() {
	getfattr --absolute-names -h -d -m - -e hex "$1" | sed 1d
}

decorate() {
	printf 'old\n' > "$1"
	setfattr -n user.origin -v 0x780079 "$1"
	setfattr -n trusted.fsafe -v t "$1"
	setfacl -m u:nobody:r,g:nogroup:rw "$1"
}

@test "write keeps user and trusted attributes and the ACL, on ext4 and xfs" {
	command -v setfacl >/dev/null || skip "needs setfacl (the acl package)"
	for fs in ext4 xfs; do
		mount_loop_or_skip "$fs" "$fs"
		decorate "$fs/f"
		before=$(attrs "$fs/f")
		[[ $before == *user.origin=0x780079* ]]
		[[ $before == *system.posix_acl_access=* ]]
		echo new | "$FSAFE" write "$fs/f"
		[ "$(attrs "$fs/f")" = "$before" ]
		echo newer | "$FSAFE" write --root "$fs" f
		[ "$(attrs "$fs/f")" = "$before" ]
		echo source > src
		printf '%s\0%s\0' "$fs/f" src | "$FSAFE" write --batch
		[ "$(attrs "$fs/f")" = "$before" ]
		[ "$(cat "$fs/f")" = source ]
		getfacl -c "$fs/f" | grep -qx 'user:nobody:r--'
		assert_no_staging "$fs"
	done
}

@test "--no-xattrs leaves the attributes behind" {
	mount_loop_or_skip ext4 ext4
	decorate ext4/f
	echo new | "$FSAFE" write --no-xattrs ext4/f
	[ -z "$(getfattr --absolute-names -d -m 'user\.' ext4/f)" ]
	[ "$(cat ext4/f)" = new ]
}

@test "a character device, a FIFO or a socket is refused and untouched" {
	[ "$(id -u)" -eq 0 ] || skip "needs root: mknod"
	mknod c c 1 3
	mkfifo p
	python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("s")' ||
		skip "needs python3 to make a socket"
	for spec in "c:character device" "p:fifo" "s:socket"; do
		f=${spec%%:*} type=${spec#*:}
		ino=$(stat -c %i "$f")
		run --separate-stderr "$FSAFE" write "$f" <<<"data"
		[ "$status" -eq 1 ]
		[ "$stderr" = "fsafe: write $f: not a regular file ($type); unchanged" ]
		run --separate-stderr "$FSAFE" write --root . "$f" <<<"data"
		[ "$status" -eq 1 ]
		[[ $stderr == *"not a regular file ($type)"* ]]
		[ "$(stat -c %i "$f")" = "$ino" ]
	done
	[ -c c ] && [ -p p ] && [ -S s ]
	assert_no_staging .
}

@test "--no-split-links refuses a file with two links; the default splits them" {
	echo old > a
	ln a b
	run --separate-stderr "$FSAFE" write --no-split-links a <<<"new"
	[ "$status" -eq 1 ]
	[ "$stderr" = "fsafe: write a: hard links: Too many links; a unchanged" ]
	[ "$(cat a)" = old ]
	echo new | "$FSAFE" write a
	[ "$(cat a)" = new ]
	[ "$(cat b)" = old ]
}

@test "stat-token and --if-unchanged: the second writer with the same token fails" {
	echo v1 > f
	token=$("$FSAFE" stat-token f)
	[ "${#token}" -eq 72 ]
	echo v2 | "$FSAFE" write --if-unchanged "$token" f
	[ "$(cat f)" = v2 ]
	run --separate-stderr "$FSAFE" write --if-unchanged "$token" f <<<"v3"
	[ "$status" -eq 1 ]
	[ "$stderr" = "fsafe: write f: changed since its token was taken; f unchanged" ]
	[ "$(cat f)" = v2 ]
	run --separate-stderr "$FSAFE" stat-token missing
	[ "$status" -eq 1 ]
	[ "$stderr" = "fsafe: stat-token missing: No such file or directory" ]
	run "$FSAFE" write --if-unchanged nonsense f <<<"v4"
	[ "$status" -eq 1 ]
	[ "$(cat f)" = v2 ]
	run --separate-stderr "$FSAFE" write --batch --if-unchanged "$token" </dev/null
	[ "$status" -eq 2 ]
	[[ $stderr == "fsafe: write: --batch does not take --if-unchanged"* ]]
	assert_no_staging .
}

@test "symlink creates and atomically replaces a link" {
	"$FSAFE" symlink release-41 current
	[ "$(readlink current)" = release-41 ]
	"$FSAFE" symlink release-42 current
	[ "$(readlink current)" = release-42 ]
	run --separate-stderr "$FSAFE" symlink --create-only x current
	[ "$status" -eq 1 ]
	[ "$(readlink current)" = release-42 ]
	mkdir d
	run --separate-stderr "$FSAFE" symlink x d
	[ "$status" -eq 1 ]
	[ "$stderr" = "fsafe: symlink d: stat: Is a directory; d unchanged" ]
	"$FSAFE" symlink --mkdir ../t deep/er/l
	[ "$(readlink deep/er/l)" = ../t ]
	run "$FSAFE" symlink onlyone
	[ "$status" -eq 2 ]
	assert_no_staging .
}
