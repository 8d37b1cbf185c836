#!/usr/bin/env bash
# Installs what airlock's build, tests and benchmark need on a fresh Debian/Ubuntu machine, and
# nothing that is already there. Idempotent; needs root for apt-get.
set -euo pipefail

need=()
command -v go >/dev/null || { echo "setup: Go is required (https://go.dev/dl), found none on PATH" >&2; exit 1; }
[ -x /usr/bin/python3 ] || need+=(python3)        # tests run Python inside sandboxes
command -v unshare >/dev/null || need+=(util-linux)   # benchmark peer
command -v bwrap >/dev/null || need+=(bubblewrap)     # benchmark peer
command -v setsid >/dev/null || need+=(util-linux)
command -v ps >/dev/null || need+=(procps)
command -v ip >/dev/null || need+=(iproute2)          # network tests build their own world; benchmark peer
command -v tc >/dev/null || need+=(iproute2)
command -v nsenter >/dev/null || need+=(util-linux)   # network tests run the daemon in a test namespace
[ -x /usr/bin/curl ] || need+=(curl)                  # network tests run curl inside sandboxes
command -v runc >/dev/null || need+=(runc)            # the container level's second runtime
[ -x /bin/busybox ] || need+=(busybox-static)         # image tests build a tiny image from it
command -v node >/dev/null || need+=(nodejs npm)      # the SDKs' and the web console's builds (make sdk, make console)
[ -x /usr/bin/chromium ] || need+=(chromium)          # the web console's tests drive it headless (test/e2e TestConsole)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)  # the microvm level's VMM
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)  # the microvm level formats its writable disks
command -v xz >/dev/null || need+=(xz-utils)          # the microvm level's kernel source is unpacked with it
# The microvm level's guest kernel is built from source (scripts/microvm/build-kernel.sh).
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v flex >/dev/null || need+=(flex)
command -v bison >/dev/null || need+=(bison)
command -v bc >/dev/null || need+=(bc)
[ -f /usr/include/libelf.h ] || need+=(libelf-dev)    # the kernel's objtool
command -v mkfs.erofs >/dev/null || need+=(erofs-utils) # the microvm level's read-only root images

if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "setup: missing ${need[*]}; run as root (or install them) first" >&2
		exit 1
	fi
	echo "setup: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# gVisor's runsc, pinned, for the container level's default runtime. It must be statically linked
# (CGO_ENABLED=0): gVisor re-executes itself inside an empty root, where no dynamic loader exists.
RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237
RUNSC=/usr/local/bin/runsc
static() { file -L "$1" 2>/dev/null | grep -q 'statically linked'; }
if [ ! -x "$RUNSC" ] || ! static "$RUNSC" || ! grep -qs "$RUNSC_VERSION" "$RUNSC.version"; then
	command -v file >/dev/null || { apt-get install -y -qq --no-install-recommends file >/dev/null; }
	echo "setup: building gVisor runsc $RUNSC_VERSION (about 2 minutes)"
	tmp=$(mktemp -d)
	if CGO_ENABLED=0 GOBIN="$tmp" go install "gvisor.dev/gvisor/runsc@$RUNSC_VERSION" && static "$tmp/runsc"; then
		install -m 0755 "$tmp/runsc" "$RUNSC"
		echo "$RUNSC_VERSION" >"$RUNSC.version"
	elif [ "$(id -u)" = 0 ] && apt-get install -y -qq --no-install-recommends runsc >/dev/null 2>&1; then
		echo "setup: go install of runsc failed; using Debian's runsc package instead" >&2
	else
		echo "setup: could not install runsc; the container level will offer runc only (airlock doctor says why)" >&2
	fi
	rm -rf "$tmp"
fi

# The wasm level's interpreters, installed in /usr/local/lib/airlock/wasm: CPython built for WASI
# from Debian's python3.11 source with Debian's clang, lld and wasi-libc (a few minutes, once),
# and QuickJS-NG from the npm package quickjs-wasi. Both scripts check what is installed against
# its manifest and return at once when it is current.
# Without them the wasm level lacks that language (airlock doctor says so) and its tests fail.
here=$(dirname "$0")
"$here/wasm/build-python.sh" || echo "setup: CPython for WASI could not be built; the wasm level will lack python" >&2
"$here/wasm/fetch-quickjs.sh" || echo "setup: quickjs-wasi could not be fetched; the wasm level will lack javascript" >&2

# The microvm level's guest kernel, built from Debian's linux-source package (pinned and checked)
# with only what a sandbox's guest uses, built in, into /usr/local/lib/airlock/microvm (about 10
# minutes on 2 idle cores the first time; returns at once when current). Without it the microvm
# level is unavailable (airlock doctor says why).
"$here/microvm/build-kernel.sh" || echo "setup: the microvm guest kernel could not be built; the microvm level will be unavailable" >&2
