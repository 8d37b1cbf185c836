#!/usr/bin/env bash
# Builds CPython 3.11 for WASI (wasm32, preview1 command module) from Debian's python3.11 source
# package, for airlock's `wasm` isolation level, and installs it as $DEST/python:
#
#   python/python.wasm            the interpreter (`_start`), run as `python.wasm -c CODE` etc.
#   python/lib/python3.11/        the pruned, precompiled standard library; the guest sees it
#                                 read-only at /usr/local/lib/python3.11 (prefix /usr/local)
#   python/LICENSE                CPython's licence and those of the code linked into the binary
#   python/manifest.json          versions, checksums, toolchain, and this script's sha256
#
# Usage: scripts/wasm/build-python.sh [DEST]   (DEST: $AIRLOCK_WASM_DIR or /usr/local/lib/airlock/wasm)
# Needs root on first run (apt-get). Idempotent: when the manifest records this script's sha256 and
# python.wasm still matches its checksum it prints "up to date" and exits at once. Set
# AIRLOCK_WASM_FORCE=1 to rebuild anyway, AIRLOCK_WASM_KEEP=1 to keep the build directory.
#
# Why from Debian's source and toolchain: everything comes through apt (signed archive), so the
# build is reproducible on any Debian 12 machine without downloading a WASI SDK.
set -euo pipefail

DEST=${1:-${AIRLOCK_WASM_DIR:-/usr/local/lib/airlock/wasm}}
OUT=$DEST/python
SCRIPT=$(readlink -f "${BASH_SOURCE[0]}")
SCRIPT_SHA=$(sha256sum "$SCRIPT" | cut -d' ' -f1)

# The wasm stack lives in linear memory (CPython links with --stack-first, so an overflow traps
# on address 0 instead of corrupting the heap). Upstream 3.11 uses 512 KiB and lowers the
# recursion limit to 600 to fit; we give it 8 MiB (a Linux main thread's default) and keep the
# usual limit of 1000, so code that recurses as deep as it may on a normal Python (json.dumps
# of 900 nested lists, repr of deep structures) behaves the same, and hitting the default
# limits raises RecursionError instead of trapping.
STACK_SIZE=$((8 << 20))
# Initial linear memory: the stack, the static data (~2 MiB) and a first heap, so the start-up
# does not spend time in memory.grow. The guest can grow it up to the runtime's memory limit.
INITIAL_MEMORY=$((16 << 20))
RECURSION_LIMIT=1000

log() { printf 'build-python: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# --- Cached? -------------------------------------------------------------------------------------
# The manifest is written by this script with one key per line, so grep/sed are enough (no
# Python or jq needed just to say "up to date").
# (No "| head" anywhere: with pipefail, a writer cut short by SIGPIPE fails the script.)
manifest_field() {
	local v
	v=$(sed -n "s/^ *\"$1\": *\"\([^\"]*\)\".*/\1/p" "$OUT/manifest.json")
	echo "${v%%$'\n'*}"
}
if [ "${AIRLOCK_WASM_FORCE:-0}" != 1 ] && [ -f "$OUT/manifest.json" ] && [ -f "$OUT/python.wasm" ]; then
	if [ "$(manifest_field script)" = "$SCRIPT_SHA" ] &&
		[ "$(manifest_field sha256)" = "$(sha256sum "$OUT/python.wasm" | cut -d' ' -f1)" ]; then
		echo "build-python: $OUT is up to date ($(manifest_field version), $(manifest_field source))"
		exit 0
	fi
fi

[ "$(id -u)" = 0 ] || die "run as root: this script installs its toolchain with apt-get"
export DEBIAN_FRONTEND=noninteractive LC_ALL=C
START=$(date +%s)

# --- Toolchain from Debian -----------------------------------------------------------------------
# apt-get update once: the package lists may be stale, and the deb-src lists below need it.
# deb-src entries go into a file of our own, mirroring the machine's own deb sources (same
# mirrors, suites and keyring), so the system's sources file is never edited.
SRC_LIST=/etc/apt/sources.list.d/airlock-src.sources
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
	want=$(sed 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources)
elif grep -qs '^deb ' /etc/apt/sources.list; then
	SRC_LIST=/etc/apt/sources.list.d/airlock-src.list
	want=$(sed -n 's/^deb /deb-src /p' /etc/apt/sources.list)
else
	die "no Debian deb sources found to derive deb-src entries from"
fi
if [ "$(cat "$SRC_LIST" 2>/dev/null)" != "$want" ]; then
	log "adding deb-src entries in $SRC_LIST"
	printf '%s\n' "$want" >"$SRC_LIST"
fi
log "apt-get update"
apt-get update -qq

# Install only what is missing; --no-upgrade so an installed python3.11 is not upgraded under
# the machine's other users (any 3.11.x has the same bytecode magic, which is checked below).
apt_need() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "apt-get install ${missing[*]}"
		apt-get install -y -qq --no-install-recommends --no-upgrade "${missing[@]}" >/dev/null
	fi
}
# clang first: the versioned packages below must match Debian's default clang (14 on Debian 12).
apt_need clang dpkg-dev make pkg-config python3.11 autoconf
CLANG_MAJOR=$(clang -dumpversion | cut -d. -f1)
# lld: wasm-ld. llvm: llvm-ar/ranlib/strip. compiler-rt builtins for wasm32: clang links them
# into every wasm program (e.g. 128-bit arithmetic used by libmpdec and long double).
apt_need "lld-$CLANG_MAJOR" "llvm-$CLANG_MAJOR" wasi-libc "libclang-rt-$CLANG_MAJOR-dev-wasm32"
for t in "clang-$CLANG_MAJOR" "wasm-ld-$CLANG_MAJOR" "llvm-ar-$CLANG_MAJOR" "llvm-ranlib-$CLANG_MAJOR" "llvm-strip-$CLANG_MAJOR"; do
	command -v "$t" >/dev/null || die "$t not found after installing the toolchain"
done
BUILD_PYTHON=/usr/bin/python3.11
[ -x "$BUILD_PYTHON" ] || die "$BUILD_PYTHON missing"

pkgver() { dpkg-query -W -f='${Version}' "$1"; }

# --- Work directory ------------------------------------------------------------------------------
WORK=$(mktemp -d /tmp/airlock-pywasi.XXXXXX)
cleanup() {
	if [ "${AIRLOCK_WASM_KEEP:-0}" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
# apt-get source downloads as the unprivileged _apt user where it can write.
mkdir -p "$WORK/src"
chown _apt "$WORK/src" 2>/dev/null || true

# A private sysroot holding only wasi-libc (found through dpkg -L, not guessed). Debian's clang
# with --sysroot=/usr would also search the host's /usr/include, where configure could find
# headers (zlib.h, ffi.h, ...) of x86-64 libraries that do not exist for wasm32.
SYSROOT=$WORK/sysroot
WASI_INC=$(dpkg -L wasi-libc | grep '/include/wasm32-wasi$')
WASI_LIB=$(dpkg -L wasi-libc | grep '/lib/wasm32-wasi$')
[ -f "$WASI_INC/stdio.h" ] && [ -f "$WASI_LIB/libc.a" ] || die "wasi-libc layout not understood ($WASI_INC, $WASI_LIB)"
mkdir -p "$SYSROOT/include" "$SYSROOT/lib"
ln -s "$WASI_INC" "$SYSROOT/include/wasm32-wasi"
ln -s "$WASI_LIB" "$SYSROOT/lib/wasm32-wasi"
TARGET_CC="clang-$CLANG_MAJOR --target=wasm32-wasi --sysroot=$SYSROOT"

# --- Sources -------------------------------------------------------------------------------------
# apt-get source fetches the .dsc (its sha256 is in the Sources index, which apt authenticates
# through the archive's signed InRelease) and dpkg-source checks every tarball against the
# .dsc, then unpacks with Debian's patches applied. A mirror may list a version it cannot serve
# yet (e.g. a fresh security upload), so versions are tried newest first.
# Sets SRC_VERSION, SRC_DSC (path) and SRC_DIR.
fetch_source() {
	local pkg=$1 v dsc
	local versions
	# Newest first.
	versions=$(apt-cache showsrc --only-source "$pkg" | sed -n 's/^Version: //p' | sort -u -r -V)
	[ -n "$versions" ] || die "no deb-src entry for $pkg (is $SRC_LIST used by apt?)"
	for v in $versions; do
		log "apt-get source $pkg=$v"
		if (cd "$WORK/src" && apt-get source -qq --only-source "$pkg=$v" >"$WORK/src/$pkg.log" 2>&1); then
			dsc=$(ls "$WORK/src/${pkg}_${v#*:}.dsc")
			SRC_VERSION=$v
			SRC_DSC=$dsc
			SRC_DIR=$(find "$WORK/src" -mindepth 1 -maxdepth 1 -type d -name "$pkg-*")
			verify_dsc "$pkg" "$v" "$dsc"
			return 0
		fi
		log "$pkg=$v could not be fetched: $(grep -m1 -E '^(E|Err):' "$WORK/src/$pkg.log" || true)"
	done
	die "could not fetch any version of the $pkg source package"
}
# Re-checks what apt did, so the manifest records checksums we have seen match: the .dsc
# against the Sources index entry, and the orig tarball against the .dsc.
verify_dsc() {
	local pkg=$1 v=$2 dsc=$3 want got orig
	want=$(apt-cache showsrc --only-source "$pkg" | awk -v v="$v" -v f="$(basename "$dsc")" '
		/^Version: / { cur = $2 }
		/^Checksums-Sha256:/ { in_sums = 1; next }
		/^[^ ]/ { in_sums = 0 }
		in_sums && cur == v && $3 == f && !done { print $1; done = 1 }')
	got=$(sha256sum "$dsc" | cut -d' ' -f1)
	[ -n "$want" ] && [ "$want" = "$got" ] || die "$dsc: sha256 $got, Sources index says '$want'"
	orig=$(ls "$(dirname "$dsc")/${pkg}_"*.orig.tar.*)
	want=$(awk -v f="$(basename "$orig")" '/^Checksums-Sha256:/ { s = 1; next } /^[^ ]/ { s = 0 } s && $3 == f { print $1 }' "$dsc")
	got=$(sha256sum "$orig" | cut -d' ' -f1)
	[ "$want" = "$got" ] || die "$orig: sha256 $got, .dsc says '$want'"
	log "verified $(basename "$dsc") sha256 $(sha256sum "$dsc" | cut -d' ' -f1) (Sources index) and $(basename "$orig") sha256 $got (.dsc)"
}

fetch_source zlib
ZLIB_VERSION=$SRC_VERSION ZLIB_DSC_SHA=$(sha256sum "$SRC_DSC" | cut -d' ' -f1) ZLIB_SRC=$SRC_DIR
fetch_source python3.11
PY_DEB_VERSION=$SRC_VERSION PY_DSC_SHA=$(sha256sum "$SRC_DSC" | cut -d' ' -f1) PY_SRC=$SRC_DIR
PY_ORIG_SHA=$(sha256sum "$(dirname "$SRC_DSC")"/python3.11_*.orig.tar.* | cut -d' ' -f1)
PY_VERSION=$(sed -n 's/^#define PY_VERSION *"\(.*\)".*/\1/p' "$PY_SRC/Include/patchlevel.h")
case $PY_VERSION in 3.11.*) ;; *) die "unexpected Python version $PY_VERSION" ;; esac

# The stdlib is precompiled by the build Python and frozen modules are made by it too, so its
# bytecode magic must equal the one of the source being built.
want_magic=$(sed -n 's/^MAGIC_NUMBER = (\([0-9]*\)).*/\1/p' "$PY_SRC/Lib/importlib/_bootstrap_external.py")
have_magic=$("$BUILD_PYTHON" -I -c 'import importlib.util as u; print(int.from_bytes(u.MAGIC_NUMBER[:2], "little"))')
[ -n "$want_magic" ] && [ "$want_magic" = "$have_magic" ] ||
	die "$BUILD_PYTHON has bytecode magic $have_magic, the source $want_magic"

# Debian's patches change configure.ac (the _sysconfigdata module name among others), and
# debian/rules regenerates configure with autoconf after patching; do the same, or the build
# would write _sysconfigdata__wasi_wasm32-wasi.py while the patched sysconfig.py looks for
# _sysconfigdata__wasm32-wasi.py.
(cd "$PY_SRC" && rm -rf autom4te.cache configure && autoconf) || die "autoconf failed"

# Two more places where 3.11 shrinks a limit for WASI's 512 KiB stack: the parser's nesting
# limit (4000 instead of 6000) and marshal's depth (1500 instead of 2000). With the 8 MiB stack
# above they get their usual values back, so code that compiles on a normal Python compiles
# here (e.g. ast.literal_eval of 150 nested lists fails with MemoryError at 4000).
sed -i 's/^#  define MAXSTACK 4000$/#  define MAXSTACK 6000/' "$PY_SRC/Parser/parser.c"
sed -i 's/^#define MAX_MARSHAL_STACK_DEPTH 1500$/#define MAX_MARSHAL_STACK_DEPTH 2000/' "$PY_SRC/Python/marshal.c"
grep -q '^#  define MAXSTACK 4000$' "$PY_SRC/Parser/parser.c" && die "Parser/parser.c: WASI MAXSTACK not raised"
grep -q '^#define MAX_MARSHAL_STACK_DEPTH 1500$' "$PY_SRC/Python/marshal.c" && die "Python/marshal.c: WASI depth not raised"

# --- zlib for wasm32 -----------------------------------------------------------------------------
# Debian's zlib source, cross-built as a static library so zlib/gzip/zipfile work in the guest.
log "building zlib $ZLIB_VERSION for wasm32-wasi"
ZPREFIX=$WORK/zlib
# (&& chains: set -e does not apply inside a command list tested with ||.)
(cd "$ZLIB_SRC" &&
	CC=$TARGET_CC AR="llvm-ar-$CLANG_MAJOR" RANLIB="llvm-ranlib-$CLANG_MAJOR" CFLAGS=-O2 CHOST=wasm32-wasi \
		./configure --static --prefix="$ZPREFIX" >"$WORK/zlib-configure.log" 2>&1 &&
	make -j"$(nproc)" libz.a >"$WORK/zlib-make.log" 2>&1 &&
	make install >>"$WORK/zlib-make.log" 2>&1) ||
	{ tail -n 30 "$WORK"/zlib-*.log >&2; die "zlib build failed"; }

# --- CPython for wasm32-wasi ---------------------------------------------------------------------
# CPython's own WASI support: Tools/wasm/config.site-wasm32-wasi answers the configure checks
# that cannot run in a cross build, and configure's WASI case picks the emulated signal/getpid/
# clock libraries, static modules and Modules/Setup.stdlib. All Debian patches stay applied: none
# breaks the WASI build (they touch the Debian install layout, distutils, tests and CVE fixes).
log "configuring CPython $PY_VERSION (Debian $PY_DEB_VERSION) for wasm32-wasi"
BUILD=$WORK/build
mkdir -p "$BUILD"
# Modules/Setup.local must exist for a WASI build (see Tools/wasm/wasm_build.py); empty = all
# modules that configure finds.
touch "$PY_SRC/Modules/Setup.local"
# PKG_CONFIG_LIBDIR: only our wasm32 zlib is visible to pkg-config, never the host's .pc files.
# OPT: configure's default without -g (no debug info to strip, faster build).
# configure is run by a relative path and -ffile-prefix-map is set so that neither VPATH nor
# __FILE__ strings (assertions, fatal errors) hold the random work directory: rebuilding gives
# the same python.wasm (see also BUILD_DATE below).
# ac_cv_*clock_nanosleep=no (both: configure retries with -lrt): time.sleep() would call
# clock_nanosleep(TIMER_ABSTIME), which wasi-libc turns into an absolute-time poll_oneoff
# subscription that wazero refuses (ENOTSUP); without it time.sleep() uses nanosleep(), a
# relative sleep wazero implements.
# --with-pymalloc: upstream turns pymalloc off for WASI by default; with it on the guest runs
# ~12% faster on allocation-heavy code and starts a little faster, and MemoryError under a
# runtime memory limit behaves the same (arenas come from malloc, there is no mmap).
(cd "$BUILD" && CONFIG_SITE="$PY_SRC/Tools/wasm/config.site-wasm32-wasi" \
		ac_cv_func_clock_nanosleep=no ac_cv_lib_rt_clock_nanosleep=no \
		CC="$TARGET_CC" CPP="$TARGET_CC -E" \
		AR="llvm-ar-$CLANG_MAJOR" RANLIB="llvm-ranlib-$CLANG_MAJOR" READELF=true \
		PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$ZPREFIX/lib/pkgconfig" \
		OPT="-DNDEBUG -fwrapv -O3 -Wall" \
		CFLAGS="-DPy_DEFAULT_RECURSION_LIMIT=$RECURSION_LIMIT -ffile-prefix-map=$WORK=/build" \
		"../src/${PY_SRC##*/}/configure" \
		--host=wasm32-unknown-wasi \
		--build="$(dpkg-architecture -qDEB_BUILD_GNU_TYPE)" \
		--with-build-python="$BUILD_PYTHON" \
		--prefix=/usr/local \
		--disable-test-modules \
		--without-ensurepip \
		--with-pymalloc \
		>"$WORK/configure.log" 2>&1) || { tail -n 40 "$WORK/configure.log" >&2; die "configure failed"; }

log "building CPython with $(nproc) jobs"
# LDFLAGS_NODIST comes after configure's "-z stack-size=524288 --initial-memory=10485760" on the
# link line, and wasm-ld takes the last value. BUILD_DATE/BUILD_TIME: as debian/rules does (for
# Debian's reproducible-buildinfo.diff), sys.version shows the changelog's date, not today's.
last_change=$(cd "$PY_SRC" && dpkg-parsechangelog -S Date)
make -C "$BUILD" -j"$(nproc)" \
	LDFLAGS_NODIST="-z stack-size=$STACK_SIZE -Wl,--initial-memory=$INITIAL_MEMORY" \
	BUILD_DATE="$(date -u +'%b %e %Y' -d "$last_change")" \
	BUILD_TIME="$(date -u +'%H:%M:%S' -d "$last_change")" \
	>"$WORK/make.log" 2>&1 || { tail -n 40 "$WORK/make.log" >&2; die "make failed"; }
[ -f "$BUILD/python.wasm" ] || die "make produced no python.wasm"
# Every module is linked in statically; Modules/config.c lists them.
BUILT_MODULES=$(sed -n 's/^extern PyObject\* PyInit_\(.*\)(void);$/\1/p' "$BUILD/Modules/config.c" | sort | tr '\n' ' ')
log "built-in extension modules: $BUILT_MODULES"

# --- Stage the runtime directory -----------------------------------------------------------------
STAGE=$WORK/out/python
LIBDIR=$STAGE/lib/python3.11
mkdir -p "$LIBDIR"
# Debug info is already off; strip what remains but keep the name section (~150 KiB), so a trap
# under wazero names the C function instead of a bare index.
"llvm-strip-$CLANG_MAJOR" --strip-debug -o "$STAGE/python.wasm" "$BUILD/python.wasm"

cp -a "$PY_SRC/Lib/." "$LIBDIR/"
# sysconfig reads the build-time variables from this module (named after MULTIARCH).
cp "$BUILD"/build/lib.wasi-wasm32-3.11/_sysconfigdata_*.py "$LIBDIR/"
sysconfigdata=$(sed -n 's/^ABIFLAGS=[[:space:]]*//p' "$BUILD/Makefile")
sysconfigdata=_sysconfigdata_${sysconfigdata}_$(sed -n 's/^MULTIARCH=[[:space:]]*//p' "$BUILD/Makefile").py
[ -f "$LIBDIR/$sysconfigdata" ] || die "the build wrote no $sysconfigdata, which sysconfig will look for"
# getpath looks for lib-dynload to find exec_prefix; without it every start prints "Could not
# find platform dependent libraries" when PYTHONHOME is unset or -I is given. All modules are
# built in, so it stays empty.
mkdir -p "$LIBDIR/lib-dynload"
cp "$PY_SRC/LICENSE" "$LIBDIR/LICENSE.txt"

# Pruned: what a sandbox without a display, a compiler, threads or subprocesses never uses, and
# packages whose C half cannot be built for WASI (importing them fails either way).
prune=(
	test idlelib tkinter turtledemo turtle.py ensurepip lib2to3 venv
	curses sqlite3 ctypes dbm/gnu.py dbm/ndbm.py
	distutils/tests unittest/test __phello__ __hello__.py
	site-packages # Debian's site.py never looks there: it uses .../dist-packages
)
for p in "${prune[@]}"; do rm -rf "${LIBDIR:?}/$p"; done
find "$LIBDIR" -depth \( -name __pycache__ -o -name '*.orig' -o -name '*.rej' \) -exec rm -rf {} +
find "$LIBDIR" -name '*.exe' -delete   # Windows launchers of distutils/setuptools

# Precompile everything. The guest mounts lib read-only, so a missing or stale .pyc would be
# recompiled on every start; unchecked-hash .pycs are used without even a stat of the source.
# -s/-p: the recorded file names are the guest's paths, so tracebacks show them (and the .py
# sources stay beside them for the source lines). Optimization level 0 only: the driver
# does not pass -O.
log "precompiling the standard library"
"$BUILD_PYTHON" -I -m compileall -q -j0 --invalidation-mode unchecked-hash \
	-s "$STAGE/lib" -p /usr/local/lib "$LIBDIR" >"$WORK/compileall.log" 2>&1 ||
	{ tail -n 20 "$WORK/compileall.log" >&2; die "compileall failed"; }

# --- Licences ------------------------------------------------------------------------------------
# python.wasm links CPython (PSF-2.0) with code under other permissive licences; they are all
# collected here: CPython's own list of incorporated software (Doc/license.rst: Mersenne Twister,
# SipHash, dtoa, expat, zlib, cfuhash, libmpdec, ... not all of which are built for WASI), the
# tiny_sha3 and BLAKE2 code of hashlib, zlib, wasi-libc (musl-derived C library) and LLVM's
# compiler-rt builtins.
{
	cat "$PY_SRC/LICENSE"
	printf '\n\n%s\n\n' "======================================================================
Third-party code in python.wasm
======================================================================
python.wasm is CPython $PY_VERSION (Debian source package python3.11 $PY_DEB_VERSION) built for
wasm32-wasi. Built in: $BUILT_MODULES
Not built (so their licences below do not apply to this binary): OpenSSL (_ssl, _hashlib),
libffi (_ctypes), sqlite3, bzip2, liblzma, Tcl/Tk.

From CPython's Doc/license.rst:"
	sed -n '/^Licenses and Acknowledgements for Incorporated Software/,$p' "$PY_SRC/Doc/license.rst"
	printf '\n\n--- tiny_sha3 (Modules/_sha3/LICENSE) ---\n\n'
	cat "$PY_SRC/Modules/_sha3/LICENSE"
	printf '\n\n--- BLAKE2 reference code (Modules/_blake2/impl) ---\n\n'
	sed -n '1,/\*\//p' "$PY_SRC/Modules/_blake2/impl/blake2b-ref.c"
	printf '\n\n--- expat (Modules/expat/COPYING) ---\n\n'
	cat "$PY_SRC/Modules/expat/COPYING"
	printf '\n\n--- zlib (Debian source package zlib %s, debian/copyright) ---\n\n' "$ZLIB_VERSION"
	cat "$ZLIB_SRC/debian/copyright"
	printf '\n\n--- wasi-libc (Debian package wasi-libc %s) ---\n\n' "$(pkgver wasi-libc)"
	cat /usr/share/doc/wasi-libc/copyright
	printf '\n\n--- compiler-rt builtins (Debian package libclang-rt-%s-dev-wasm32 %s) ---\n\n' \
		"$CLANG_MAJOR" "$(pkgver "libclang-rt-$CLANG_MAJOR-dev-wasm32")"
	cat "/usr/share/doc/libclang-rt-$CLANG_MAJOR-dev-wasm32/copyright"
} >"$STAGE/LICENSE"

# --- Manifest ------------------------------------------------------------------------------------
WASM_SHA=$(sha256sum "$STAGE/python.wasm" | cut -d' ' -f1)
CLANG_FULL=$(clang-"$CLANG_MAJOR" -dumpversion)
cat >"$STAGE/manifest.json" <<EOF
{
  "name": "python",
  "version": "$PY_VERSION",
  "source": "Debian source package python3.11 $PY_DEB_VERSION",
  "sourceSha256": "$PY_DSC_SHA",
  "sourceOrigSha256": "$PY_ORIG_SHA",
  "zlib": "Debian source package zlib $ZLIB_VERSION",
  "zlibSha256": "$ZLIB_DSC_SHA",
  "wasm": "python.wasm",
  "sha256": "$WASM_SHA",
  "licence": "PSF-2.0",
  "stackSize": $STACK_SIZE,
  "recursionLimit": $RECURSION_LIMIT,
  "initialMemory": $INITIAL_MEMORY,
  "toolchain": {
    "clang": "$CLANG_FULL (Debian clang-$CLANG_MAJOR $(pkgver "clang-$CLANG_MAJOR"))",
    "lld": "Debian lld-$CLANG_MAJOR $(pkgver "lld-$CLANG_MAJOR")",
    "wasi-libc": "$(pkgver wasi-libc)",
    "compiler-rt": "Debian libclang-rt-$CLANG_MAJOR-dev-wasm32 $(pkgver "libclang-rt-$CLANG_MAJOR-dev-wasm32")",
    "build-python": "Debian python3.11 $(pkgver python3.11)"
  },
  "builtAt": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "script": "$SCRIPT_SHA"
}
EOF

# --- Install -------------------------------------------------------------------------------------
# Copy next to the old tree, then swap with two renames, so a driver never sees half a tree.
mkdir -p "$DEST"
NEW=$DEST/.python.new.$$
OLD=$DEST/.python.old.$$
rm -rf "$NEW" "$OLD"
cp -a "$STAGE" "$NEW"
chmod -R a+rX,go-w "$NEW"
if [ -e "$OUT" ]; then mv "$OUT" "$OLD"; fi
mv "$NEW" "$OUT"
rm -rf "$OLD"

log "installed $OUT: python.wasm $(stat -c %s "$OUT/python.wasm") bytes, lib $(du -sh "$OUT/lib" | cut -f1), in $(($(date +%s) - START)) s"
echo "build-python: installed CPython $PY_VERSION (Debian $PY_DEB_VERSION) in $OUT"
