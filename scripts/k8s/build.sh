#!/usr/bin/env bash
# build.sh builds the local cluster's binaries (docs/kubernetes.md#a-local-cluster) from the Go
# module proxy at the versions pinned by the scratch modules beside it (go.mod and go.sum):
#   kubernetes/     kube-apiserver, kube-scheduler, kube-controller-manager, kubectl (k8s.io/kubernetes,
#                   its staging modules replaced by their published versions) and etcd (etcd's
#                   own main, at the version that kube-apiserver was released with)
#   agent-sandbox/  the agent-sandbox controller (sigs.k8s.io/agent-sandbox) and its CRDs
#
# Usage: scripts/k8s/build.sh [--background] [DEST]
#   DEST defaults to $AIRLOCK_K8S_DIR, then /usr/local/lib/airlock/k8s. Files land in DEST/bin,
#   DEST/crds and DEST/manifest.json. One build at a time: a second run waits for the first
#   (flock on DEST.lock), then finds the manifest current.
#   --background returns at once: the build (if one is needed) goes on detached, at nice 10, its
#   output in DEST.log; a later run without it waits for it. make test starts one so, then works on
#   its other steps and waits only before go test.
#
# A cold build takes about 15 minutes on 2 cores (docs/tests.md says what was measured); a second
# run with everything in place and unchanged exits 0 in a second or two.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
background=0
if [[ "${1:-}" == --background ]]; then
	background=1
	shift
fi
DEST="${1:-${AIRLOCK_K8S_DIR:-/usr/local/lib/airlock/k8s}}"
DEST="${DEST%/}"
readonly BINS=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl agent-sandbox-controller)

die() { echo "k8s/build: $*" >&2; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
# version_of GOMOD MODULE: the version a go.mod requires, in a block or on a one-line require.
version_of() { awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$1"; }

KUBERNETES=$(version_of "$here/kubernetes/go.mod" k8s.io/kubernetes)
ETCD=$(version_of "$here/kubernetes/go.mod" go.etcd.io/etcd/server/v3)
AGENT_SANDBOX=$(version_of "$here/agent-sandbox/go.mod" sigs.k8s.io/agent-sandbox)
[[ -n "$KUBERNETES" && -n "$ETCD" && -n "$AGENT_SANDBOX" ]] || die "cannot read the pinned versions from the go.mod files"
GO_VERSION=$(go env GOVERSION)
# What the binaries were built from: this script and the scratch modules, whole.
INPUTS=$(cat "${BASH_SOURCE[0]}" "$here"/kubernetes/{go.mod,go.sum,tools.go,etcd/main.go} "$here"/agent-sandbox/{go.mod,go.sum,tools.go} | sha256sum | cut -d' ' -f1)

field() { sed -n "s/^  \"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" "$DEST/manifest.json" 2>/dev/null | head -n1; }

current() {
	[[ -f "$DEST/manifest.json" && "$(field inputs)" == "$INPUTS" && "$(field go)" == "$GO_VERSION" ]] || return 1
	local b
	for b in "${BINS[@]}"; do
		[[ -x "$DEST/bin/$b" && "$(field "sha256:$b")" == "$(sha "$DEST/bin/$b")" ]] || return 1
	done
	[[ -n "$(ls "$DEST"/crds/*.yaml 2>/dev/null)" ]]
}

if current; then
	echo "k8s/build: kubernetes $KUBERNETES, etcd $ETCD, agent-sandbox $AGENT_SANDBOX already built in $DEST"
	exit 0
fi
mkdir -p "$(dirname "$DEST")"
if [[ $background == 1 ]]; then
	setsid nice -n 10 "${BASH_SOURCE[0]}" "$DEST" </dev/null >"$DEST.log" 2>&1 &
	echo "k8s/build: building in the background (about 15 minutes cold on 2 cores), output in $DEST.log"
	exit 0
fi
exec 9>"$DEST.lock"
if ! flock -n 9; then
	echo "k8s/build: another build into $DEST is under way (see $DEST.log); waiting for it"
	flock 9
	if current; then
		echo "k8s/build: kubernetes $KUBERNETES, etcd $ETCD, agent-sandbox $AGENT_SANDBOX built in $DEST"
		exit 0
	fi
	echo "k8s/build: that build did not finish; building again"
fi

echo "k8s/build: building kubernetes $KUBERNETES, etcd $ETCD and agent-sandbox $AGENT_SANDBOX into $DEST (about 15 minutes cold on 2 cores)"
start=$(date +%s)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
# The binaries say their version (kubectl version, /version), as a release's do.
vflags="-X k8s.io/component-base/version.gitVersion=$KUBERNETES -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES"
vflags+=" -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitTreeState=clean"
(cd "$here/kubernetes" && go build -trimpath -ldflags "-s -w $vflags" -o "$TMP/bin/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl ./etcd) || die "go build of the control plane failed"
(cd "$here/agent-sandbox" && go build -trimpath -ldflags '-s -w' -o "$TMP/bin/" \
	sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller) || die "go build of agent-sandbox failed"
# The CRDs ship in the module's source, at the same version.
mod=$(cd "$here/agent-sandbox" && go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)
mkdir -p "$TMP/crds"
cp "$mod"/k8s/crds/*.yaml "$TMP/crds/" || die "agent-sandbox $AGENT_SANDBOX has no k8s/crds"
chmod 0644 "$TMP"/crds/*.yaml
took=$(($(date +%s) - start))

{
	echo "{"
	echo "  \"kubernetes\": \"$KUBERNETES\","
	echo "  \"etcd\": \"$ETCD\","
	echo "  \"agentSandbox\": \"$AGENT_SANDBOX\","
	echo "  \"go\": \"$GO_VERSION\","
	echo "  \"inputs\": \"$INPUTS\","
	echo "  \"buildSeconds\": \"$took\","
	for b in "${BINS[@]}"; do echo "  \"sha256:$b\": \"$(sha "$TMP/bin/$b")\","; done
	echo "  \"licence\": \"Apache-2.0\""
	echo "}"
} >"$TMP/manifest.json"

mkdir -p "$DEST"
rm -rf "$DEST/bin" "$DEST/crds"
mv "$TMP/bin" "$DEST/bin"
mv "$TMP/crds" "$DEST/crds"
mv "$TMP/manifest.json" "$DEST/manifest.json"
echo "k8s/build: built in ${took}s into $DEST"
