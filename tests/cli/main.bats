#!/usr/bin/env bats
# The dispatcher as the subcommands see it.

load helpers

setup() {
	cli_setup
}

@test "no command: usage on stderr, exit 2" {
	run --separate-stderr "$FSAFE"
	[ "$status" -eq 2 ]
	[ -z "$output" ]
	[[ $stderr == "usage: fsafe COMMAND"* ]]
}

@test "an unknown command: exit 2" {
	run --separate-stderr "$FSAFE" frobnicate
	[ "$status" -eq 2 ]
	[[ $stderr == *"unknown command"* ]]
}

@test "--help lists write, sweep and is-staging" {
	run --separate-stderr "$FSAFE" --help
	[ "$status" -eq 0 ]
	[[ $output == *" write "* ]]
	[[ $output == *" sweep "* ]]
	[[ $output == *" is-staging "* ]]
}

@test "--version prints the library's version" {
	run "$FSAFE" --version
	[ "$status" -eq 0 ]
	[[ $output =~ ^fsafe\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
}

@test "every subcommand answers --help on stdout with exit 0" {
	local cmd
	for cmd in write sweep is-staging; do
		run --separate-stderr "$FSAFE" "$cmd" --help
		[ "$status" -eq 0 ] && [[ $output == "usage: fsafe $cmd"* ]] &&
		[ -z "$stderr" ] ||
			{ echo "$cmd: status $status" >&2; return 1; }
	done
}

@test "every subcommand rejects an unknown option with exit 2" {
	local cmd
	for cmd in write sweep is-staging; do
		run --separate-stderr "$FSAFE" "$cmd" --no-such-option x
		[ "$status" -eq 2 ] && [ -z "$output" ] &&
		[[ $stderr == "fsafe: $cmd: unknown option --no-such-option"* ]] ||
			{ echo "$cmd: status $status: $stderr" >&2; return 1; }
	done
}
