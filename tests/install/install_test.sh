#!/usr/bin/env bash
# The install test (CTest label "install").
#
#   1. configure a fresh build of the project (FSAFE_TESTS=OFF, so this test
#      does not recurse) in a temporary directory, build it, and
#      `cmake --install` it into a temporary prefix;
#   2. check the installed tree piece by piece: headers, libfsafe.a,
#      libfsafe.so -> libfsafe.so.0 -> libfsafe.so.X.Y.Z with the right
#      SONAME, fsafe.pc, the CMake package, bin/fsafe, man pages;
#   3. build a consumer program against the prefix through pkg-config and
#      through find_package(fsafe), run each, and check the file it wrote.
#
# Any missing or wrong piece ends the test with "install test: FAIL: ..."
# and a non-zero status. The temporary directory is removed on success and
# kept on failure (its path is printed), or always with FSAFE_KEEP_INSTALL=1.
#
# usage: install_test.sh [--source DIR] [--cmake CMAKE] [--generator GEN]
#                        [--cc CC] [--work DIR]
# No `grep -q` at the end of a pipeline: with pipefail, the writer it
# stops reading from dies of SIGPIPE and the pipeline "fails".
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
cmake=cmake
generator=
cc=cc
work_base=${TMPDIR:-/tmp}

while [ $# -gt 0 ]; do
	case $1 in
	--source) source_dir=$2 ;;
	--cmake) cmake=$2 ;;
	--generator) generator=$2 ;;
	--cc) cc=$2 ;;
	--work) work_base=$2 ;;
	*) echo "install_test.sh: unknown argument: $1" >&2; exit 2 ;;
	esac
	shift 2
done

fail() {
	echo "install test: FAIL: $*" >&2
	[ -n "${tmp:-}" ] && echo "install test: work directory kept: $tmp" >&2
	exit 1
}
step() { echo "== $*"; }
ok() { echo "   ok: $*"; }
note() { echo "   NOTE: $*"; }

# run LOG WHAT CMD...: run CMD with its output in LOG; on failure show the
# end of the log and fail with WHAT.
run() {
	local log=$1 what=$2
	shift 2
	if ! "$@" >"$log" 2>&1; then
		echo "---- last lines of $log ----" >&2
		tail -n 60 "$log" >&2
		echo "----" >&2
		fail "$what (command: $*)"
	fi
}

for tool in "$cmake" "$cc" pkg-config readelf nm ldd; do
	command -v "$tool" >/dev/null 2>&1 || fail "required tool not found: $tool"
done

# The version the project declares: project(fsafe VERSION X.Y.Z ...).
version=$(sed -n 's/^project(fsafe VERSION \([0-9][0-9.]*\).*/\1/p' \
	"$source_dir/CMakeLists.txt" | head -n 1)
[ -n "$version" ] || fail "cannot read the project version from $source_dir/CMakeLists.txt"
major=${version%%.*}

mkdir -p "$work_base" || fail "cannot create $work_base"
tmp=$(mktemp -d "$work_base/fsafe-install.XXXXXX") || fail "mktemp failed"
build=$tmp/build
prefix=$tmp/prefix
out=$tmp/out
mkdir -p "$out/pc" "$out/cmake-shared" "$out/cmake-static"
libdir=$prefix/lib

gen_args=()
[ -n "$generator" ] && gen_args=(-G "$generator")

echo "install test: source $source_dir, version $version, work $tmp"

# ---------------------------------------------------------------------------
step "configure, build and install into $prefix"
run "$tmp/configure.log" "configuring the project failed" \
	"$cmake" -S "$source_dir" -B "$build" "${gen_args[@]}" \
	-DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DFSAFE_TESTS=OFF -DCMAKE_INSTALL_PREFIX="$prefix" \
	-DCMAKE_INSTALL_LIBDIR=lib
ok "configured"
run "$tmp/build.log" "building the project failed" \
	"$cmake" --build "$build" --parallel 2
ok "built"
run "$tmp/install.log" "cmake --install failed" "$cmake" --install "$build"
ok "installed ($(find "$prefix" -type f -o -type l | wc -l) files)"

# ---------------------------------------------------------------------------
step "headers"
[ -f "$prefix/include/fsafe.h" ] || fail "missing include/fsafe.h"
n=0
while IFS= read -r rel; do
	[ -f "$prefix/include/$rel" ] || fail "header include/$rel is in the source tree but not installed"
	n=$((n + 1))
done < <(cd "$source_dir/include" && find . -name '*.h' | sed 's|^\./||' | sort)
ok "all $n public header(s) installed"
while IFS= read -r rel; do
	# libfsafe-nats's header comes from nats/include, when it is built.
	[ -f "$source_dir/include/$rel" ] || [ -f "$source_dir/nats/include/$rel" ] || fail "installed header include/$rel is not a public header (private header leaked?)"
	# Each header compiles on its own, twice (include guard), warning-free.
	printf '#include <%s>\n#include <%s>\nint fsafe_install_check_;\n' "$rel" "$rel" |
		"$cc" -std=c17 -Wall -Wextra -Werror -fsyntax-only \
			-I"$prefix/include" -x c - 2>"$tmp/header.log" ||
		{ head -n 20 "$tmp/header.log" >&2; fail "installed header include/$rel does not compile on its own (a consumer may include it first: it must include what it uses, e.g. <fsafe.h>)"; }
done < <(cd "$prefix/include" && find . -type f | sed 's|^\./||' | sort)
ok "every installed header is public and self-contained"

# ---------------------------------------------------------------------------
step "libraries"
[ -f "$libdir/libfsafe.a" ] || fail "missing lib/libfsafe.a"
nm "$libdir/libfsafe.a" 2>/dev/null | grep ' T fsafe_write_fileat$' >/dev/null ||
	fail "lib/libfsafe.a does not define fsafe_write_fileat"
ok "lib/libfsafe.a"

so=libfsafe.so
so_major=$so.$major
so_full=$so.$version
[ -L "$libdir/$so" ] || fail "lib/$so is missing or not a symbolic link"
[ "$(readlink "$libdir/$so")" = "$so_major" ] ||
	fail "lib/$so points to '$(readlink "$libdir/$so")', expected $so_major"
[ -L "$libdir/$so_major" ] || fail "lib/$so_major is missing or not a symbolic link"
[ "$(readlink "$libdir/$so_major")" = "$so_full" ] ||
	fail "lib/$so_major points to '$(readlink "$libdir/$so_major")', expected $so_full"
[ -f "$libdir/$so_full" ] && [ ! -L "$libdir/$so_full" ] ||
	fail "lib/$so_full is missing or not a regular file"
ok "lib/$so -> $so_major -> $so_full"

soname=$(readelf -d "$libdir/$so_full" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ "$soname" = "$so_major" ] || fail "SONAME of lib/$so_full is '$soname', expected $so_major"
ok "SONAME $soname"

# The shared library exports the public API and nothing else; the static
# and shared libraries are the production build, not the test build.
exports=$(nm -D --defined-only "$libdir/$so_full" | awk '$2 ~ /^[TDBRVW]$/ {print $3}')
echo "$exports" | grep -x fsafe_write_fileat >/dev/null || fail "lib/$so_full does not export fsafe_write_fileat"
stray=$(echo "$exports" | grep -v '^fsafe_' | grep -v '^_' || true)
internal=$(echo "$exports" | grep '^fsafe__' || true)
[ -z "$stray$internal" ] ||
	fail "lib/$so_full exports non-API symbols: $(echo $stray $internal)"
ok "lib/$so_full exports only fsafe_* ($(echo "$exports" | grep -c '^fsafe_') symbols)"
for lib in "$libdir/libfsafe.a" "$libdir/$so_full"; do
	if nm -A "$lib" 2>/dev/null | grep 'fsafe__sys_swap' >/dev/null; then
		fail "$(basename "$lib") contains the test-only system-call table (FSAFE_TESTING build installed?)"
	fi
done
ok "no test-only code installed"
[ ! -e "$libdir/libfsafe_testing.a" ] || fail "the test library libfsafe_testing.a was installed"

# ---------------------------------------------------------------------------
step "pkg-config file"
pc=$libdir/pkgconfig/fsafe.pc
[ -f "$pc" ] || fail "missing lib/pkgconfig/fsafe.pc"
export PKG_CONFIG_PATH=$libdir/pkgconfig
unset PKG_CONFIG_SYSROOT_DIR
pc_version=$(pkg-config --modversion fsafe) || fail "pkg-config cannot read fsafe.pc"
[ "$pc_version" = "$version" ] || fail "fsafe.pc Version is '$pc_version', expected $version"
# The prefix is relative to the .pc file itself (relocatable), so compare
# the directories the flags name, not their spelling.
same_dir() { [ "$(realpath -m "$1")" = "$(realpath -m "$2")" ]; }
pc_prefix=$(pkg-config --variable=prefix fsafe)
same_dir "$pc_prefix" "$prefix" || fail "fsafe.pc prefix is '$pc_prefix', expected $prefix"
pc_cflags=$(pkg-config --cflags fsafe)
pc_libs=$(pkg-config --libs fsafe)
flag_dir() { # flag_dir -I "flags" DIR: does some -IX in flags name DIR?
	for f in $2; do
		case $f in "$1"*) same_dir "${f#"$1"}" "$3" && return 0 ;; esac
	done
	return 1
}
# pkg-config drops -I/usr/include; our prefix is never a system dir.
flag_dir -I "$pc_cflags" "$prefix/include" ||
	fail "pkg-config --cflags fsafe gives '$pc_cflags', missing -I$prefix/include"
flag_dir -L "$pc_libs" "$libdir" ||
	fail "pkg-config --libs fsafe gives '$pc_libs', missing -L$libdir"
case " $pc_libs " in *" -lfsafe "*) ;; *)
	fail "pkg-config --libs fsafe gives '$pc_libs', missing -lfsafe" ;;
esac
ok "fsafe.pc: version $pc_version, cflags '$(echo $pc_cflags)', libs '$(echo $pc_libs)'"

# ---------------------------------------------------------------------------
step "CMake package"
cmdir=$libdir/cmake/fsafe
for f in fsafeConfig.cmake fsafeConfigVersion.cmake fsafeTargets.cmake; do
	[ -f "$cmdir/$f" ] || fail "missing lib/cmake/fsafe/$f"
done
for t in fsafe::fsafe fsafe::fsafe_static; do
	grep -q "add_library($t " "$cmdir/fsafeTargets.cmake" ||
		fail "lib/cmake/fsafe/fsafeTargets.cmake does not define $t"
done
ok "lib/cmake/fsafe: Config, ConfigVersion, Targets (fsafe::fsafe, fsafe::fsafe_static)"
# Installed metadata must not point back into the source or build tree.
# (The prefix itself may lie inside the source tree, as under CTest: ignore
# it before looking.)
leaks=$(find "$cmdir" "$libdir/pkgconfig" -type f | while IFS= read -r f; do
	sed "s|$prefix||g" "$f" | grep -F -e "$source_dir/" -e "$build/" >/dev/null &&
		echo "$f"
done)
[ -z "$leaks" ] || fail "installed files refer to the source/build tree: $leaks"
ok "no source or build paths in the installed metadata"

# ---------------------------------------------------------------------------
step "command-line tool"
[ -x "$prefix/bin/fsafe" ] || fail "missing bin/fsafe"
if ! cli_version=$("$prefix/bin/fsafe" --version 2>&1); then
	echo "$cli_version" >&2
	fail "bin/fsafe --version exited non-zero"
fi
case $cli_version in *"$version"*) ;; *)
	fail "bin/fsafe --version printed '$cli_version', expected it to contain $version" ;;
esac
ok "bin/fsafe --version: $(echo "$cli_version" | head -n 1)"

# man_source PAGE: the roff text of an installed page, gzipped or not.
man_source() {
	case $1 in *.gz) zcat "$1" ;; *) cat "$1" ;; esac
}

# ---------------------------------------------------------------------------
step "man pages"
shopt -s nullglob
scd=("$source_dir"/doc/*.scd)
shopt -u nullglob
if [ ${#scd[@]} -eq 0 ]; then
	note "SKIPPED: no doc/*.scd in the source tree, so no man pages are expected"
	found=$(cd "$prefix" && find share/man -type f 2>/dev/null | sort | tr '\n' ' ')
	[ -n "$found" ] && note "installed anyway: $found"
elif ! command -v scdoc >/dev/null 2>&1; then
	# FSAFE_MAN=AUTO builds no pages without scdoc, and says so.
	note "SKIPPED: scdoc is not installed, so the build made no man pages"
else
	for src in "${scd[@]}"; do
		page=$(basename "$src" .scd)      # e.g. fsafe.1, fsafe_write_file.3
		sect=${page##*.}
		case $sect in [1-9]*) ;; *)
			fail "doc/$(basename "$src") is not named NAME.SECTION.scd" ;;
		esac
		dest=$prefix/share/man/man${sect%%[!0-9]*}/$page
		[ -f "$dest" ] || [ -f "$dest.gz" ] ||
			fail "man page $page (from doc/$(basename "$src")) not installed as share/man/man${sect%%[!0-9]*}/$page"
		# Rendered roff (a .TH line), not the scdoc source.
		if [ -f "$dest" ]; then
			grep '^\.TH ' "$dest" >/dev/null ||
				fail "share/man/man${sect%%[!0-9]*}/$page is not a rendered man page (no .TH line)"
		else
			zcat "$dest.gz" | grep '^\.TH ' >/dev/null ||
				fail "share/man/man${sect%%[!0-9]*}/$page.gz is not a rendered man page (no .TH line)"
		fi
	done
	[ -f "$prefix/share/man/man1/fsafe.1" ] || [ -f "$prefix/share/man/man1/fsafe.1.gz" ] ||
		fail "missing share/man/man1/fsafe.1"
	ok "${#scd[@]} man page(s) installed: $(cd "$prefix/share/man" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')"

	# Every reference to a page of this project (fsafe*, libfsafe*; system
	# pages such as rename(2) are not ours to check) names a page that is
	# installed. Font escapes go first: scdoc renders *x*(1) as \fBx\fR(1).
	nrefs=0
	while IFS= read -r man; do
		rel=${man#"$prefix/share/man/"}
		while IFS= read -r ref; do
			name=${ref%%(*}
			sect=${ref#*(}
			sect=${sect%)}
			dir=$prefix/share/man/man${sect%%[!0-9]*}
			[ -f "$dir/$name.$sect" ] || [ -f "$dir/$name.$sect.gz" ] ||
				fail "$rel refers to $ref, but no share/man/man${sect%%[!0-9]*}/$name.$sect is installed"
			nrefs=$((nrefs + 1))
		done < <(man_source "$man" | sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' |
			grep -oE '(^|[^A-Za-z0-9_.-])(lib)?fsafe[A-Za-z0-9_.-]*\([1-9][a-z]*\)' |
			sed -E 's/^[^a-z]//' | sort -u)
	done < <(find "$prefix/share/man" -type f | sort)
	[ "$nrefs" -gt 0 ] || fail "no man page refers to another: the cross-reference check found nothing to check"
	ok "$nrefs cross-reference(s) between the man pages resolve to installed pages"
fi

# check_written FILE TEXT: FILE holds exactly TEXT plus a newline, and no
# staging file was left beside it.
check_written() {
	local file=$1 text=$2
	[ -f "$file" ] || fail "$file was not written"
	[ "$(cat "$file")" = "$text" ] && [ "$(wc -c <"$file")" -eq $((${#text} + 1)) ] ||
		fail "$file holds '$(cat "$file")', expected '$text'"
	local left
	left=$(ls -A "$(dirname "$file")" | grep '^\.fsafe-' || true)
	[ -z "$left" ] || fail "staging file(s) left beside $file: $left"
}

# check_resolves EXE: the dynamic loader finds libfsafe.so.MAJOR in the
# prefix (with whatever LD_LIBRARY_PATH the caller set).
check_resolves() {
	local exe=$1 got
	readelf -d "$exe" | grep "(NEEDED).*\[$so_major\]" >/dev/null ||
		fail "$(basename "$exe") does not depend on $so_major"
	got=$(ldd "$exe" | awk -v l="$so_major" '$1 == l {print $3}')
	[ "$got" = "$libdir/$so_major" ] ||
		fail "$(basename "$exe") loads $so_major from '$got', expected $libdir/$so_major"
}

# ---------------------------------------------------------------------------
step "consumer via pkg-config (shared)"
# shellcheck disable=SC2086 # pkg-config output is a list of words
run "$tmp/consumer-pc.log" "building the consumer with pkg-config flags failed" \
	"$cc" -std=c17 -Wall -Wextra -Werror -o "$tmp/consumer_pc" \
	"$here/consumer/consumer.c" $pc_cflags $pc_libs
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
check_resolves "$tmp/consumer_pc"
text="written through pkg-config"
run "$tmp/run-pc.log" "the pkg-config consumer failed" \
	"$tmp/consumer_pc" "$out/pc/file.txt" "$text"
check_written "$out/pc/file.txt" "$text"
ok "built, loads $libdir/$so_major, wrote $out/pc/file.txt"
unset LD_LIBRARY_PATH

# ---------------------------------------------------------------------------
step "consumer via pkg-config --static (libfsafe.a)"
# libfsafe.a itself, then everything `pkg-config --static` says it needs
# (Libs.private, Requires.private): proves the .pc lists the static
# library's own dependencies.
pc_static=$(pkg-config --static --libs fsafe) ||
	fail "pkg-config --static --libs fsafe failed (a Requires.private package missing?)"
static_deps=()
for w in $pc_static; do
	case $w in -L"$libdir" | -lfsafe) ;; *) static_deps+=("$w") ;; esac
done
run "$tmp/consumer-pc-static.log" "linking the consumer statically with 'pkg-config --static --libs fsafe' ($(echo $pc_static)) failed" \
	"$cc" -std=c17 -Wall -Wextra -Werror -o "$tmp/consumer_pc_static" \
	"$here/consumer/consumer.c" $pc_cflags "$libdir/libfsafe.a" "${static_deps[@]}"
if readelf -d "$tmp/consumer_pc_static" | grep "(NEEDED).*libfsafe" >/dev/null; then
	fail "the statically linked consumer still depends on the shared libfsafe"
fi
text="written through pkg-config, static"
mkdir -p "$out/pc-static"
run "$tmp/run-pc-static.log" "the statically linked pkg-config consumer failed" \
	"$tmp/consumer_pc_static" "$out/pc-static/file.txt" "$text"
check_written "$out/pc-static/file.txt" "$text"
ok "linked with libfsafe.a + '$(echo "${static_deps[@]}")', wrote $out/pc-static/file.txt"

# ---------------------------------------------------------------------------
step "man page examples"
# Each section-3 page carries a complete program between the scdoc
# comments "; EXAMPLE BEGIN" and "; EXAMPLE END". It is taken from the
# source as scdoc renders it (fences dropped; a backslash escapes the next
# character, so "\\n" in the source reads "\n"),
# built against the installed library exactly as a reader would build it,
# and run in an empty directory: an example that no longer builds or works
# fails here instead of in a reader's hands.
shopt -s nullglob
scd3=("$source_dir"/doc/*.3.scd)
shopt -u nullglob
nex=0
for src in "${scd3[@]}"; do
	page=$(basename "$src" .scd)
	grep -qx '; EXAMPLE BEGIN' "$src" ||
		fail "doc/$page.scd has no EXAMPLE program (between '; EXAMPLE BEGIN' and '; EXAMPLE END')"
	exdir=$tmp/examples/$page
	mkdir -p "$exdir/run"
	awk -v out="$exdir/example" '
		/^; EXAMPLE BEGIN$/ { n++; inside = 1; next }
		/^; EXAMPLE END$/ { inside = 0; next }
		inside && !/^```$/ { print > (out "-" n ".c") }
		END { if (inside) exit 1 }
	' "$src" || fail "doc/$page.scd: '; EXAMPLE BEGIN' without '; EXAMPLE END'"
	for c in "$exdir"/example-*.c; do
		sed -i 's/\\\(.\)/\1/g' "$c"
		exe=${c%.c}
		# shellcheck disable=SC2086 # pkg-config output is a list of words
		run "$exe.build.log" "the example of $page ($(basename "$c")) does not build" \
			"$cc" -std=c17 -Wall -Wextra -Werror -o "$exe" "$c" $pc_cflags $pc_libs
		(cd "$exdir/run" && LD_LIBRARY_PATH=$libdir timeout 60 "$exe") \
			>"$exe.run.log" 2>&1 ||
			{ tail -n 20 "$exe.run.log" >&2; fail "the example of $page ($(basename "$c")) exits non-zero"; }
		nex=$((nex + 1))
	done
done
ok "$nex example program(s) of ${#scd3[@]} section-3 page(s) built and ran"

# ---------------------------------------------------------------------------
step "consumer via find_package(fsafe) (shared and static)"
run "$tmp/consumer-cmake-configure.log" "configuring the CMake consumer failed" \
	"$cmake" -S "$here/consumer" -B "$tmp/consumer-build" "${gen_args[@]}" \
	-DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
grep -qF "fsafe_DIR=$cmdir" "$tmp/consumer-cmake-configure.log" ||
	fail "find_package(fsafe) did not use $cmdir ($(grep fsafe_DIR= "$tmp/consumer-cmake-configure.log"))"
run "$tmp/consumer-cmake-build.log" "building the CMake consumer failed" \
	"$cmake" --build "$tmp/consumer-build"
shared=$tmp/consumer-build/consumer_shared
static=$tmp/consumer-build/consumer_static
# CMake gives the build tree an RPATH to the imported library: no
# LD_LIBRARY_PATH needed.
check_resolves "$shared"
if readelf -d "$static" | grep "(NEEDED).*libfsafe" >/dev/null; then
	fail "consumer_static (fsafe::fsafe_static) depends on the shared libfsafe"
fi
text="written through find_package, shared"
run "$tmp/run-cmake-shared.log" "the CMake consumer (fsafe::fsafe) failed" \
	"$shared" "$out/cmake-shared/file.txt" "$text"
check_written "$out/cmake-shared/file.txt" "$text"
text="written through find_package, static"
run "$tmp/run-cmake-static.log" "the CMake consumer (fsafe::fsafe_static) failed" \
	"$static" "$out/cmake-static/file.txt" "$text"
check_written "$out/cmake-static/file.txt" "$text"
ok "fsafe::fsafe and fsafe::fsafe_static consumers built, ran, and wrote their files"

# Replacing an existing file goes through the same installed library.
text="rewritten through find_package"
run "$tmp/run-cmake-rewrite.log" "the CMake consumer failed to replace its file" \
	"$shared" "$out/cmake-shared/file.txt" "$text"
check_written "$out/cmake-shared/file.txt" "$text"
ok "replacing an existing file works"

# ---------------------------------------------------------------------------
echo "install test: PASS"
if [ "${FSAFE_KEEP_INSTALL:-0}" = 1 ]; then
	echo "install test: work directory kept: $tmp"
else
	rm -rf "$tmp"
fi
exit 0
