#!/usr/bin/env bats
# The one option layer every subcommand shares: options before and after
# the operands, "--", --help, and the promises of the man pages that the
# old per-command parsers broke (issue 17).

load helpers

setup() {
	cli_setup
}

COMMANDS=(write sweep is-staging lock store inbox spool checkpoint symlink
          stat-token)

@test "every subcommand answers --help and -h: usage on stdout, exit 0" {
	local cmd flag
	for cmd in "${COMMANDS[@]}"; do
		for flag in --help -h; do
			run --separate-stderr "$FSAFE" "$cmd" "$flag"
			[ "$status" -eq 0 ] && [[ $output == "usage: fsafe $cmd"* ]] &&
			[ -z "$stderr" ] ||
				{ echo "$cmd $flag: status $status" >&2; return 1; }
		done
	done
}

@test "--help fails when its output cannot be written" {
	local cmd
	run bash -c "'$FSAFE' --help > /dev/full"
	[ "$status" -ne 0 ]
	for cmd in "${COMMANDS[@]}"; do
		run bash -c "'$FSAFE' $cmd --help > /dev/full"
		[ "$status" -eq 1 ] ||
			{ echo "$cmd: status $status" >&2; return 1; }
	done
}

@test "every subcommand: an unknown option or a missing value is exit 2 with usage" {
	local cmd
	for cmd in "${COMMANDS[@]}"; do
		run --separate-stderr "$FSAFE" "$cmd" x --no-such-option
		[ "$status" -eq 2 ] && [ -z "$output" ] &&
		[[ $stderr == "fsafe: $cmd: unknown option --no-such-option"* ]] &&
		[[ $stderr == *"usage: fsafe $cmd"* ]] ||
			{ echo "$cmd: status $status: $stderr" >&2; return 1; }
	done
	run --separate-stderr "$FSAFE" sweep d --older-than
	[ "$status" -eq 2 ]
	[[ $stderr == *"option --older-than needs a value"* ]]
	run --separate-stderr "$FSAFE" is-staging --verbose=yes x
	[ "$status" -eq 2 ]
	[[ $stderr == *"option --verbose takes no value"* ]]
}

@test "write: options before or after FILE; -- ends them" {
	echo one | "$FSAFE" write --no-sync f
	echo two | "$FSAFE" write f --no-sync
	[ "$(cat f)" = two ]
	echo three | "$FSAFE" write --mode=600 -- -f
	[ "$(cat ./-f)" = three ]
	[ "$(stat -c %a ./-f)" = 600 ]
}

@test "sweep, is-staging, stat-token, symlink: options on either side, --" {
	mkdir d ./-d
	"$FSAFE" sweep -o 1h d
	"$FSAFE" sweep d --older-than=1h --dry-run
	"$FSAFE" sweep -o 1h -- -d
	run "$FSAFE" is-staging x -v
	[ "$status" -eq 1 ]
	[ "$output" = "other x" ]
	run "$FSAFE" is-staging -v -- -v
	[ "$status" -eq 1 ]
	[ "$output" = "other -v" ]
	echo x > ./-t
	a=$("$FSAFE" stat-token -- -t)
	b=$("$FSAFE" stat-token ./-t --no-follow)
	[ "$a" = "$b" ]
	"$FSAFE" symlink t1 l --no-sync
	"$FSAFE" symlink -s t2 l
	"$FSAFE" symlink -- t3 -l
	[ "$(readlink l)" = t2 ]
	[ "$(readlink ./-l)" = t3 ]
}

@test "lock: options after LOCKFILE, COMMAND keeps its own, -- before it" {
	run "$FSAFE" lock f -t 5s sh -c 'exit 3'
	[ "$status" -eq 3 ]
	run "$FSAFE" lock --no-wait f -- sh -c 'echo "$0 $1"' a -t
	[ "$status" -eq 0 ]
	[ "$output" = "a -t" ]
	run "$FSAFE" lock f true --status
	[ "$status" -eq 0 ]
}

@test "store: options anywhere; after -- a key may start with a dash" {
	"$FSAFE" store -c s put k <<< v
	"$FSAFE" store s put -- -x <<< dash
	[ "$("$FSAFE" store s get -- -x)" = dash ]
	run "$FSAFE" store s ls -l
	[ "$status" -eq 0 ]
	[[ $output == *" 5 -x"* ]]
	run "$FSAFE" store -l s ls
	[[ $output == *" 2 k"* ]]
	run "$FSAFE" store s put k --if-version 9 <<< w
	[ "$status" -eq 1 ]
}

@test "inbox, spool, checkpoint: options on either side of the operation, --" {
	echo m | "$FSAFE" inbox ib put > /dev/null
	run --separate-stderr "$FSAFE" inbox ib take --content
	[ "$output" = m ]
	echo n | "$FSAFE" inbox -- -ib put > /dev/null
	run --separate-stderr "$FSAFE" inbox --content -- -ib take
	[ "$output" = n ]
	printf 'a\nb\n' | "$FSAFE" spool sp append
	run "$FSAFE" spool sp read -s
	[ "${lines[0]}" = "$(printf '1\ta')" ]
	run "$FSAFE" spool --seq sp read --max=1
	[ "$output" = "$(printf '1\ta')" ]
	printf 'c\n' | "$FSAFE" spool -- -sp append
	[ "$("$FSAFE" spool -- -sp read)" = c ]
	echo x > ./-a
	"$FSAFE" checkpoint ck save -r r1 -- -a
	"$FSAFE" checkpoint -r r2 ck save ./-a
	run "$FSAFE" checkpoint ck ls
	[[ $output == *'revision "r2"'* ]]
	"$FSAFE" checkpoint ck load out --revision r2
	[ "$(cat out/-a)" = x ]
}

@test "spool read --max 0 is refused (not: every record)" {
	printf 'a\nb\n' | "$FSAFE" spool sp append
	run --separate-stderr "$FSAFE" spool sp read --max 0
	[ "$status" -eq 2 ]
	[ -z "$output" ]
	[[ $stderr == *"--max takes a whole number from 1"* ]]
	run "$FSAFE" spool sp read --max 1
	[ "$output" = a ]
}

@test "spool append: --max-record 0 and --segment-size 0 are refused; sizes take K, M, G" {
	run --separate-stderr "$FSAFE" spool sp append --max-record 0 <<< a
	[ "$status" -eq 2 ]
	run --separate-stderr "$FSAFE" spool sp append --segment-size 0 <<< a
	[ "$status" -eq 2 ]
	run --separate-stderr "$FSAFE" spool sp append --max-record 257M <<< a
	[ "$status" -eq 2 ]
	[ ! -e sp ]
	"$FSAFE" spool sp append --max-record 1K --segment-size 1M <<< a
	run "$FSAFE" spool sp append --max-record 1 <<< toolong
	[ "$status" -eq 1 ]
}

@test "inbox take --wait --timeout 0 tries once and does not wait" {
	"$FSAFE" inbox ib put < /dev/null > /dev/null
	"$FSAFE" inbox ib take > /dev/null
	run timeout 10 "$FSAFE" inbox ib take --wait --timeout 0
	[ "$status" -eq 3 ]
	run timeout 10 "$FSAFE" inbox ib take --timeout 0ms
	[ "$status" -eq 3 ]
}

# closed CMD...: runs the fsafe subcommand CMD with standard input closed,
# bounded in time (a read of the wrong descriptor could block).
closed() {
	timeout 10 bash -c '"$@" <&-' closed "$FSAFE" "$@"
}

@test "a closed standard input, output or error is never a directory the CLI opened" {
	"$FSAFE" store -c s put k <<< v
	run --separate-stderr closed store s ls
	[ "$status" -eq 0 ]
	[ "$output" = k ]
	run --separate-stderr closed store s put k2
	[ "$status" -eq 1 ]
	[[ $stderr == *"Bad file descriptor"* ]]
	[[ $stderr != *"Is a directory"* ]]
	run timeout 10 "$FSAFE" store s get k2
	[ "$status" -eq 1 ]
	run timeout 10 bash -c "'$FSAFE' store s get k >&-"
	[ "$status" -eq 1 ]
	run timeout 10 bash -c "'$FSAFE' store s get k 2>&-"
	[ "$output" = v ]
	echo m | "$FSAFE" inbox ib put > /dev/null
	run --separate-stderr closed inbox ib ls
	[ "$status" -eq 0 ]
	[[ $output == "new "* ]]
	run --separate-stderr closed inbox ib put
	[ "$status" -eq 1 ]
	[[ $stderr != *"Is a directory"* ]]
	echo r | "$FSAFE" spool sp append
	run --separate-stderr closed spool sp read
	[ "$status" -eq 0 ]
	[ "$output" = r ]
	run --separate-stderr closed spool sp append
	[ "$status" -eq 1 ]
	[[ $stderr != *"Is a directory"* ]]
	[ "$("$FSAFE" spool sp read)" = r ]
}

@test "checkpoint save --revision with a control character or over 1024 bytes: exit 2 before anything" {
	echo x > a
	run --separate-stderr "$FSAFE" checkpoint ck save --revision $'v1\nv2' a
	[ "$status" -eq 2 ]
	[[ $stderr == *"--revision holds a control character"* ]]
	run --separate-stderr "$FSAFE" checkpoint ck save \
		--revision "$(head -c 102400 /dev/zero | tr '\0' r)" a
	[ "$status" -eq 2 ]
	[[ $stderr == *"--revision longer than 1024 bytes"* ]]
	[ ! -e ck ]
	"$FSAFE" checkpoint ck save --revision "$(head -c 1024 /dev/zero | tr '\0' r)" a
}

@test "write '' is a usage error (exit 2)" {
	run --separate-stderr "$FSAFE" write '' <<< x
	[ "$status" -eq 2 ]
	[[ $stderr == *"empty path"* ]]
	run --separate-stderr "$FSAFE" write --root '' f <<< x
	[ "$status" -eq 2 ]
}

@test "lock takes every duration its page does: longer than any clock is for ever" {
	run timeout 10 "$FSAFE" lock -t 100000d f true
	[ "$status" -eq 0 ]
	run timeout 10 "$FSAFE" lock -t 99999999999999999999d f true
	[ "$status" -eq 0 ]
	run timeout 10 "$FSAFE" lock -t 0 f true
	[ "$status" -eq 0 ]
	run --separate-stderr "$FSAFE" lock -t 1y f true
	[ "$status" -eq 2 ]
}

@test "--root refusals name the step, not 'Invalid cross-device link'" {
	mkdir root
	run --separate-stderr "$FSAFE" write --root root ../x <<< a
	[ "$status" -eq 1 ]
	[[ $stderr == *"leaves the root"* ]]
	[[ $stderr != *"cross-device"* ]]
	run --separate-stderr "$FSAFE" sweep --root root -o 1h /tmp
	[ "$status" -eq 1 ]
	[[ $stderr == *"absolute path"* ]]
	[[ $stderr != *"cross-device"* ]]
}

@test "store --timeout bounds the lock wait: update whose COMMAND uses the same store" {
	"$FSAFE" store -c s put k <<< 1
	run --separate-stderr timeout 20 "$FSAFE" store s update k -- \
		"$FSAFE" store -t 200ms s put k2 /dev/null
	[ "$status" -eq 1 ]
	[[ $stderr == *"put k2: the store's lock is held (past --timeout)"* ]]
	[[ $stderr == *"unchanged"* ]]
	run timeout 20 "$FSAFE" store s update k -- "$FSAFE" store -t 0 s get k
	[ "$status" -eq 0 ]
	[ "$("$FSAFE" store s get k)" = 1 ]
}

@test "a FIFO or a dangling link as LOCKFILE or store directory is named as such" {
	mkfifo fifo
	ln -s nowhere dangling
	run --separate-stderr timeout 10 "$FSAFE" lock --status fifo
	[ "$status" -eq 1 ]
	[[ $stderr == *"a FIFO is there, not a lock file"* ]]
	run --separate-stderr timeout 10 "$FSAFE" lock --status dangling
	[[ $stderr == *"a symbolic link is there, not a lock file"* ]]
	run --separate-stderr timeout 10 "$FSAFE" store fifo ls
	[ "$status" -eq 1 ]
	[[ $stderr == *"store fifo: a FIFO is there, not a directory"* ]]
	run --separate-stderr timeout 10 "$FSAFE" store -c dangling put k <<< v
	[ "$status" -eq 1 ]
	[[ $stderr == *"a dangling symbolic link is there, not a directory"* ]]
	run --separate-stderr timeout 10 "$FSAFE" inbox fifo take
	[[ $stderr == *"a FIFO is there, not a directory"* ]]
	[ ! -e nowhere ]
}
