#!/usr/bin/env bash
# fetch-quickjs.sh installs QuickJS-NG compiled to WebAssembly (the npm package
# quickjs-wasi, pinned below) for airlock's `wasm` isolation level.
#
# Usage: scripts/wasm/fetch-quickjs.sh [DEST]
#   DEST defaults to $AIRLOCK_WASM_DIR, then /usr/local/lib/airlock/wasm.
#   Files land in DEST/quickjs/: quickjs.wasm, LICENSE (quickjs-wasi, MIT),
#   LICENSE.quickjs-ng (the engine's own MIT notice, which the package does not
#   ship), manifest.json.
#
# The tarball comes from `npm pack` (or the registry URL with curl when npm is
# missing) and its sha512 is checked against the pinned integrity before
# anything is unpacked. A second run with everything in place exits 0 at once.
set -euo pipefail

readonly PKG=quickjs-wasi
readonly VERSION=3.6.2
readonly INTEGRITY='sha512-FCqGtGOrMgzUiIrMNMA2YnsOxCNwo31dzqXvclXUC6xeT35NJLKXQJsvbeCTjvoFAwZgEAPg8U6+KAPDGXn8Mg=='
readonly TARBALL_URL="https://registry.npmjs.org/${PKG}/-/${PKG}-${VERSION}.tgz"

DEST="${1:-${AIRLOCK_WASM_DIR:-/usr/local/lib/airlock/wasm}}"
OUT="${DEST%/}/quickjs"

die() { echo "fetch-quickjs: $*" >&2; exit 1; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

SCRIPT_SHA="$(sha256_of "${BASH_SOURCE[0]}")"

# manifest_field NAME prints a string field of $OUT/manifest.json (one field a
# line, as written below), so the fast path needs no jq.
manifest_field() {
	sed -n "s/^  \"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" "$OUT/manifest.json" 2>/dev/null | head -n1
}

# Fast path: installed by this very script, same pin, wasm unchanged.
if [[ -f "$OUT/manifest.json" && -f "$OUT/quickjs.wasm" && -f "$OUT/LICENSE" && -f "$OUT/LICENSE.quickjs-ng" ]] &&
	[[ "$(manifest_field version)" == "$VERSION" ]] &&
	[[ "$(manifest_field integrity)" == "$INTEGRITY" ]] &&
	[[ "$(manifest_field script)" == "$SCRIPT_SHA" ]] &&
	[[ "$(manifest_field sha256)" == "$(sha256_of "$OUT/quickjs.wasm")" ]]; then
	echo "fetch-quickjs: $PKG@$VERSION already installed in $OUT"
	exit 0
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

tgz="$TMP/$PKG-$VERSION.tgz"
if command -v npm >/dev/null 2>&1 &&
	(cd "$TMP" && npm pack --silent "$PKG@$VERSION" >/dev/null 2>"$TMP/npm.err") &&
	[[ -f "$tgz" ]]; then
	:
else
	[[ -f "$TMP/npm.err" ]] && sed 's/^/npm: /' "$TMP/npm.err" >&2
	command -v curl >/dev/null 2>&1 || die "neither npm nor curl could fetch $PKG@$VERSION"
	curl -fsSL --retry 3 -o "$tgz" "$TARBALL_URL" || die "download failed: $TARBALL_URL"
fi

# Verify the Subresource-Integrity style sha512 ourselves, before unpacking.
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 | tr -d '\n')"
[[ "$got" == "$INTEGRITY" ]] || die "integrity mismatch for $PKG@$VERSION: got $got, want $INTEGRITY"

mkdir -p "$TMP/x"
tar -xzf "$tgz" -C "$TMP/x" --no-same-owner --no-same-permissions \
	package/quickjs.wasm package/LICENSE package/package.json ||
	die "tarball lacks quickjs.wasm, LICENSE or package.json"
pkgdir="$TMP/x/package"

grep -q "\"version\": \"$VERSION\"" "$pkgdir/package.json" || die "package.json is not version $VERSION"
grep -q '"license": "MIT"' "$pkgdir/package.json" || die "package.json no longer says MIT; review the licence"
grep -q '^MIT License' "$pkgdir/LICENSE" || die "LICENSE is not the MIT licence; review it"
# \0asm magic and version 1: a WebAssembly binary.
[[ "$(head -c 8 "$pkgdir/quickjs.wasm" | od -An -tx1 | tr -d ' \n')" == "0061736d01000000" ]] ||
	die "quickjs.wasm is not a WebAssembly binary"

# The engine version is the NUL-terminated JS_GetVersion() string in the data
# section (the same value qjs_get_quickjs_version returns at run time).
qjs_version="$(LC_ALL=C tr '\0' '\n' <"$pkgdir/quickjs.wasm" | LC_ALL=C grep -axE '[0-9]+\.[0-9]+\.[0-9]+' || true)"
[[ "$(printf '%s\n' "$qjs_version" | grep -c .)" == 1 ]] || qjs_version=unknown

# quickjs-wasi's LICENSE covers only Vercel's wrapper; its README says the
# bundled QuickJS-NG engine keeps its own notice, which the package does not
# ship. The engine's MIT notice (quickjs-ng/quickjs LICENSE) goes alongside.
cat >"$TMP/LICENSE.quickjs-ng" <<'EOF'
quickjs.wasm contains QuickJS-NG (https://github.com/quickjs-ng/quickjs),
distributed under the following licence:

The MIT License (MIT)

Copyright (c) 2017-2026 Fabrice Bellard
Copyright (c) 2017-2024 Charlie Gordon
Copyright (c) 2023-2026 Ben Noordhuis
Copyright (c) 2023-2026 Saúl Ibarra Corretgé

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in
all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL
THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN
THE SOFTWARE.

QuickJS-NG's libunicode-table.h is derived from the Unicode Character
Database and is covered by the UNICODE LICENSE V3 (see the LICENSE file of
the quickjs-ng/quickjs repository). The binary also links wasi-libc
(Apache-2.0 WITH LLVM-exception, MIT) and dlmalloc (CC0).
EOF

wasm_sha="$(sha256_of "$pkgdir/quickjs.wasm")"
cat >"$TMP/manifest.json" <<EOF
{
  "name": "quickjs",
  "package": "$PKG",
  "version": "$VERSION",
  "quickjsVersion": "$qjs_version",
  "integrity": "$INTEGRITY",
  "wasm": "quickjs.wasm",
  "sha256": "$wasm_sha",
  "licence": "MIT",
  "fetchedAt": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "script": "$SCRIPT_SHA"
}
EOF

# Install: each file via rename within $OUT, the manifest last so a crash
# midway never leaves a manifest that vouches for files not in place.
mkdir -p "$OUT"
for f in quickjs.wasm LICENSE; do
	install -m 0644 "$pkgdir/$f" "$OUT/.$f.new"
	mv -f "$OUT/.$f.new" "$OUT/$f"
done
for f in LICENSE.quickjs-ng manifest.json; do
	install -m 0644 "$TMP/$f" "$OUT/.$f.new"
	mv -f "$OUT/.$f.new" "$OUT/$f"
done
echo "fetch-quickjs: installed $PKG@$VERSION (QuickJS-NG $qjs_version, sha256 $wasm_sha) in $OUT"
