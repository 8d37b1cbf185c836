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
