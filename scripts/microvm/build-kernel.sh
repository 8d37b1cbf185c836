#!/usr/bin/env bash
# build-kernel.sh builds the guest kernel of airlock's `microvm` isolation level from Debian's
# kernel source (linux-source-6.1, pinned below, its .deb checked against the pinned sha256):
# `make allnoconfig` plus scripts/microvm/guest-kernel.config, everything the guest uses built in.
# Against Debian's stock kernel with modules (what the level booted before) it boots in a third
# of the time under TCG: no modules to load, no drivers to probe. QEMU's microvm machine boots
# its uncompressed vmlinux through the PVH entry.
#
# Usage: scripts/microvm/build-kernel.sh [DEST]
#   DEST defaults to $AIRLOCK_MICROVM_DIR, then /usr/local/lib/airlock/microvm.
#   Files land in DEST: vmlinux, config (the kernel's .config), COPYING (the kernel's licence)
#   and manifest.json.
#
# A second run with everything in place exits 0 at once: the manifest records the source, the
# recipe and the config fragment. The build takes about 10 minutes on 2 idle cores (more on busy
# ones: 11 minutes measured at load 1-3); its tree is removed after. Needs apt-get (for `apt-get
# download`), gcc, make, flex, bison, bc, xz and libelf-dev (scripts/setup.sh installs them).
set -euo pipefail

readonly PKG=linux-source-6.1
readonly VERSION=6.1.176-1
readonly SHA256=9305d1a151b8e83dcb88aa11361e7b9513f0c252bdf7f5647e4542762d99c094
# RECIPE names how this script builds: raise it when a change here changes the kernel it makes
# (the fragment's changes are seen by its digest), so that hosts build again.
readonly RECIPE=1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly FRAGMENT="$here/guest-kernel.config"

DEST="${1:-${AIRLOCK_MICROVM_DIR:-/usr/local/lib/airlock/microvm}}"
DEST="${DEST%/}"

die() { echo "build-kernel: $*" >&2; exit 1; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
FRAGMENT_SHA="$(sha256_of "$FRAGMENT")"

manifest_field() {
	sed -n "s/^  \"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" "$DEST/manifest.json" 2>/dev/null | head -n1
}

# Fast path: built by this very script, from the same source and fragment, vmlinux unchanged.
if [[ -f "$DEST/manifest.json" && -f "$DEST/vmlinux" ]] &&
	[[ "$(manifest_field package)" == "$PKG" ]] &&
	[[ "$(manifest_field version)" == "$VERSION" ]] &&
	[[ "$(manifest_field recipe)" == "$RECIPE" ]] &&
	[[ "$(manifest_field fragment)" == "$FRAGMENT_SHA" ]] &&
	[[ "$(manifest_field vmlinuxSha256)" == "$(sha256_of "$DEST/vmlinux")" ]]; then
	echo "build-kernel: the guest kernel ($PKG $VERSION) is already built in $DEST"
	exit 0
fi

for tool in apt-get gcc make flex bison bc xz; do
	command -v "$tool" >/dev/null || die "$tool is needed (scripts/setup.sh installs it)"
done
TMP="$(mktemp -d /var/tmp/airlock-kernel.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
chmod 0755 "$TMP" # apt's download user writes here

echo "build-kernel: downloading $PKG=$VERSION"
(cd "$TMP" && apt-get download -qq "$PKG=$VERSION" 2>"$TMP/apt.err") ||
	{ sed 's/^/apt: /' "$TMP/apt.err" >&2; die "could not download $PKG=$VERSION (run apt-get update; the mirror may have moved on: update the pin)"; }
deb="$(ls "$TMP"/*.deb)"
[[ "$(sha256_of "$deb")" == "$SHA256" ]] || die "$deb: sha256 $(sha256_of "$deb"), pinned $SHA256"

echo "build-kernel: unpacking"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$TMP" ./usr/src/linux-source-6.1.tar.xz
tar -xJf "$TMP/usr/src/linux-source-6.1.tar.xz" -C "$TMP"
rm -f "$deb" "$TMP/usr/src/linux-source-6.1.tar.xz"
src="$TMP/linux-source-6.1"

echo "build-kernel: configuring (allnoconfig + $(basename "$FRAGMENT"))"
make -C "$src" -s allnoconfig >/dev/null
"$src/scripts/kconfig/merge_config.sh" -m -O "$src" "$src/.config" "$FRAGMENT" >/dev/null 2>&1
make -C "$src" -s olddefconfig >/dev/null 2>&1
# Every line of the fragment must hold: a symbol renamed or a dependency missing would otherwise
# drop silently, and the guest find out at boot.
missing=0
while IFS= read -r line; do
	case "$line" in CONFIG_* | "# CONFIG_"*" is not set") ;; *) continue ;; esac
	grep -qxF "$line" "$src/.config" || { echo "build-kernel: not in the final config: $line" >&2; missing=1; }
done <"$FRAGMENT"
((missing == 0)) || die "the config fragment does not hold"

echo "build-kernel: building vmlinux with $(nproc) jobs"
start=$SECONDS
make -C "$src" -s -j"$(nproc)" KBUILD_BUILD_USER=airlock KBUILD_BUILD_HOST=airlock vmlinux >"$TMP/build.log" 2>&1 ||
	{ tail -n 40 "$TMP/build.log" >&2; die "the kernel build failed"; }
release="$(make -C "$src" -s kernelrelease)"

mkdir -p "$DEST"
rm -rf "$DEST/modules" # what the stock kernel of earlier airlock versions loaded
install -m 0644 "$src/vmlinux" "$DEST/vmlinux.new" && mv "$DEST/vmlinux.new" "$DEST/vmlinux"
install -m 0644 "$src/.config" "$DEST/config"
install -m 0644 "$src/COPYING" "$DEST/COPYING"
cat >"$DEST/manifest.json" <<EOF
{
  "package": "$PKG",
  "version": "$VERSION",
  "release": "$release",
  "debSha256": "$SHA256",
  "vmlinuxSha256": "$(sha256_of "$DEST/vmlinux")",
  "recipe": "$RECIPE",
  "fragment": "$FRAGMENT_SHA",
  "buildSeconds": "$((SECONDS - start))",
  "licence": "GPL-2.0"
}
EOF
echo "build-kernel: $release installed in $DEST ($((SECONDS - start)) s)"
