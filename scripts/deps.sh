# Sourced by the README's commands: install what a fresh Debian 12 machine
# lacks, when we may (root). Each package is asked for only if missing.
fsafe_need() {
	local missing=()
	for pkg in "$@"; do
		dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null |
			grep -q "install ok installed" || missing+=("$pkg")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "fsafe: missing Debian packages: ${missing[*]} (run as root to install them)" >&2
		return 1
	fi
	echo "fsafe: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null
}

# liburing-dev is optional for a build (the batch falls back to a thread
# pool without it), but a build without it has no io_uring at all; the
# same for libssl-dev and the checkpoint's fast SHA-256. The README's
# commands build the full library.
FSAFE_BUILD_DEPS=(cmake make gcc pkg-config scdoc liburing-dev libssl-dev)
# The tests: compilers and frameworks, the filesystems the power-loss and
# damage tests make (ext4, xfs, btrfs loop images), xattr and ACL tools,
# pytest for the Python binding, and libnats-dev with nats-server for the
# forwarder's JetStream sink (libfsafe-nats is built only with libnats).
FSAFE_TEST_DEPS=(clang libclang-rt-14-dev libcmocka-dev bats strace
                 e2fsprogs xfsprogs btrfs-progs util-linux attr acl
                 python3-pytest libnats-dev nats-server)

# The Node binding: node, npm and Node's headers (node_api.h). Each is
# asked for only when missing, so a Node installed another way (the
# nodesource packages ship their headers) is kept: Debian's nodejs, npm,
# and libnode-dev for the headers.
fsafe_need_node() {
	local pkgs=()
	command -v node >/dev/null || pkgs+=(nodejs)
	command -v npm >/dev/null || pkgs+=(npm)
	[ -f /usr/include/node/node_api.h ] ||
		[ -f /usr/local/include/node/node_api.h ] || pkgs+=(libnode-dev)
	[ ${#pkgs[@]} -eq 0 ] || fsafe_need "${pkgs[@]}"
}
