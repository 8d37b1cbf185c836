#!/usr/bin/env bash
# fetch-kernel.sh installs the guest kernel of airlock's `microvm` isolation level: Debian's
# linux-image package (pinned below, its .deb checked against the pinned sha256), from which it
# takes an uncompressed vmlinux (QEMU's microvm machine boots it through its PVH entry, about
# twice as fast as a bzImage under TCG) and the few modules the guest loads at boot, with their
# dependencies: virtio over MMIO, the serial control channel, block disks, the network card, erofs
# (the read-only images of the root: the host template, OCI layers, templates), overlay (an
# image's layers stacked), 9p (the operator's volumes) and ext4 (the writable layer).
#
# Usage: scripts/microvm/fetch-kernel.sh [DEST]
#   DEST defaults to $AIRLOCK_MICROVM_DIR, then /usr/local/lib/airlock/microvm.
#   Files land in DEST: vmlinux, modules/*.ko, modules/order (load order, one file a line),
#   COPYING (the kernel's licence) and manifest.json.
#
# The initramfs is not built here: the daemon builds it from its own binary (airlock's init is
# the guest's PID 1) and these modules, at the first microvm sandbox (internal/driver/microvm).
# A second run with everything in place exits 0 at once. Needs apt-get (for `apt-get download`)
# and xz; no kernel is installed on the host.
set -euo pipefail

readonly PKG=linux-image-6.1.0-50-amd64
readonly VERSION=6.1.176-1
readonly SHA256=7b5597492a0a65aee61985a492e6bcc3f2cde830072a0e3b3d8c7e1b90279bd3
readonly KREL=6.1.0-50-amd64
# The modules the guest needs; their dependencies are added from each module's modinfo.
# crc32c_generic first: libcrc32c (erofs') finds the crc32c algorithm when it loads.
readonly WANT=(crc32c_generic virtio_mmio virtio_console virtio_blk virtio_net erofs overlay 9pnet_virtio 9p ext4)

DEST="${1:-${AIRLOCK_MICROVM_DIR:-/usr/local/lib/airlock/microvm}}"
DEST="${DEST%/}"

die() { echo "fetch-kernel: $*" >&2; exit 1; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
SCRIPT_SHA="$(sha256_of "${BASH_SOURCE[0]}")"

manifest_field() {
	sed -n "s/^  \"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" "$DEST/manifest.json" 2>/dev/null | head -n1
}

# Fast path: installed by this very script, same pin, files unchanged.
if [[ -f "$DEST/manifest.json" && -f "$DEST/vmlinux" && -f "$DEST/modules/order" ]] &&
	[[ "$(manifest_field version)" == "$VERSION" ]] &&
	[[ "$(manifest_field debSha256)" == "$SHA256" ]] &&
	[[ "$(manifest_field script)" == "$SCRIPT_SHA" ]] &&
	[[ "$(manifest_field vmlinuxSha256)" == "$(sha256_of "$DEST/vmlinux")" ]] &&
	[[ "$(manifest_field modulesSha256)" == "$(cd "$DEST/modules" && cat order $(cat order) | sha256sum | cut -d' ' -f1)" ]]; then
	echo "fetch-kernel: $PKG $VERSION already installed in $DEST"
	exit 0
fi

command -v apt-get >/dev/null || die "apt-get is needed to download $PKG"
command -v xz >/dev/null || die "xz is needed to decompress the kernel (apt-get install xz-utils)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
chmod 0755 "$TMP" # apt's download user writes here

echo "fetch-kernel: downloading $PKG=$VERSION"
(cd "$TMP" && apt-get download -qq "$PKG=$VERSION" 2>"$TMP/apt.err") ||
	{ sed 's/^/apt: /' "$TMP/apt.err" >&2; die "could not download $PKG=$VERSION (run apt-get update; the mirror may have moved on: update the pin)"; }
deb="$(ls "$TMP"/*.deb)"
[[ "$(sha256_of "$deb")" == "$SHA256" ]] || die "$deb: sha256 $(sha256_of "$deb"), want $SHA256"
mkdir "$TMP/x"
dpkg-deb -x "$deb" "$TMP/x"
vmlinuz="$TMP/x/boot/vmlinuz-$KREL"
[[ -f "$vmlinuz" ]] || die "no vmlinuz-$KREL in the package"

# extract_vmlinux: a bzImage carries the kernel as one compressed stream after its setup code
# (Debian's is xz). Find the stream's magic and decompress from there; trailing bytes after the
# stream are the bzImage's own, hence the tolerated error. Then check that the result is an ELF.
extract_vmlinux() {
	local off
	for off in $(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$1" | cut -d: -f1); do
		tail -c +"$((off + 1))" "$1" | xz -dcq >"$2" 2>/dev/null || true
		if [[ "$(head -c 4 "$2" | od -An -c | tr -d ' ')" == '177ELF' ]]; then
			return 0
		fi
	done
	return 1
}
extract_vmlinux "$vmlinuz" "$TMP/vmlinux" || die "no xz-compressed ELF kernel found in $vmlinuz"

# The modules and their dependencies (modinfo's depends= and softdep pre:), dependencies first.
kmods="$TMP/x/lib/modules/$KREL/kernel"
declare -A path=() done=()
while IFS= read -r f; do
	n="$(basename "$f" .ko)"
	path["${n//-/_}"]="$f"
done < <(find "$kmods" -name '*.ko')
modinfo_field() { tr '\0' '\n' <"$1" | sed -n "s/^$2=//p" | head -n1; }
order=()
add() {
	local m="${1//-/_}" d
	[[ -n "${done[$m]:-}" ]] && return 0
	[[ -n "${path[$m]:-}" ]] || die "module $m is not in $PKG"
	done[$m]=1
	for d in $(modinfo_field "${path[$m]}" depends | tr ',' ' '); do add "$d"; done
	order+=("$m")
}
for m in "${WANT[@]}"; do add "$m"; done

# strip_signature removes a module's appended signature: checking it (sha256 of the module, then
# RSA) is pure CPU, which under TCG is emulated and slow, and it protects nothing here — the
# package's digest was checked above, and the guest kernel does not enforce signatures.
# Layout: module, signature, struct module_signature (12 bytes, sig_len big-endian last), magic.
strip_signature() {
	local f="$1" magic='~Module signature appended~' size siglen
	[[ "$(tail -c 28 "$f" | head -c 27)" == "$magic" ]] || return 0
	size=$(stat -c %s "$f")
	siglen=$(tail -c 32 "$f" | head -c 4 | od -An -tu1 | awk '{print $1*16777216 + $2*65536 + $3*256 + $4}')
	truncate -s $((size - 28 - 12 - siglen)) "$f"
}

out="$TMP/out"
mkdir -p "$out/modules"
cp "$TMP/vmlinux" "$out/vmlinux"
for m in "${order[@]}"; do
	cp "${path[$m]}" "$out/modules/$m.ko"
	strip_signature "$out/modules/$m.ko"
done
printf '%s.ko\n' "${order[@]}" >"$out/modules/order"
cp "$TMP/x/usr/share/doc/$PKG/copyright" "$out/COPYING" 2>/dev/null || echo "GPL-2.0 (Debian package $PKG $VERSION)" >"$out/COPYING"
mods_sha="$(cd "$out/modules" && cat order $(cat order) | sha256sum | cut -d' ' -f1)"
cat >"$out/manifest.json" <<EOF
{
  "package": "$PKG",
  "version": "$VERSION",
  "release": "$KREL",
  "debSha256": "$SHA256",
  "vmlinuxSha256": "$(sha256_of "$out/vmlinux")",
  "modulesSha256": "$mods_sha",
  "script": "$SCRIPT_SHA",
  "licence": "GPL-2.0"
}
EOF

mkdir -p "$(dirname "$DEST")"
rm -rf "$DEST.new"
cp -r "$out" "$DEST.new"
rm -rf "$DEST.old"
[[ -e "$DEST" ]] && mv "$DEST" "$DEST.old"
mv "$DEST.new" "$DEST"
rm -rf "$DEST.old"
echo "fetch-kernel: installed $PKG $VERSION ($KREL): vmlinux and ${#order[@]} modules in $DEST"
