# airlock — see README.md. `make run` and `make test` work on a fresh Debian machine as root.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# BUILD_ID tells the binaries of one make run apart: airlock runs airlock-guest in its microvm
# guests only if it is of the same run (internal/driver/microvm/guestbin.go).
BUILD_ID := $(shell date +%s%N)
LDFLAGS  := -s -w -X github.com/airlockrun/airlock/internal/cli.Version=$(VERSION) -X github.com/airlockrun/airlock/internal/guest.Build=$(VERSION)-$(BUILD_ID)
BIN      := bin/airlock
# A static binary: no dynamic loader at every sandbox start, same binary on every host.
export CGO_ENABLED := 0
# The linter `make vet` runs (.golangci.yml), pinned: built from the Go module proxy into
# .cache/bin, which is not committed.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT         := $(CURDIR)/.cache/bin/golangci-lint

.PHONY: all deps k8s-binaries k8s-binaries-background cluster wasm-runtimes console build sdk sdk-typescript sdk-python run demo test bench bench-sdk bench-tools bench-daemon bench-network bench-container bench-snapshot bench-audit bench-wasm bench-microvm bench-cluster vet lint golangci-lint fmt clean openapi

all: build

deps:
	@scripts/setup.sh

# The local Kubernetes cluster's binaries (make test and make cluster build them): kube-apiserver, etcd,
# kube-scheduler, kube-controller-manager, kubectl and the agent-sandbox controller from the Go
# module proxy at pinned versions, into /usr/local/lib/airlock/k8s (scripts/k8s/build.sh).
k8s-binaries:
	@scripts/k8s/build.sh

k8s-binaries-background:
	@scripts/k8s/build.sh --background

# A local Kubernetes cluster whose three nodes are airlock daemons on this machine: prints a
# KUBECONFIG and an example; Ctrl-C stops it and removes everything (docs/kubernetes.md).
cluster: k8s-binaries build
	$(GO) run ./test/cluster/up -airlock $(BIN)

# The wasm level's interpreters alone (deps installs them too): CPython for WASI, built from
# Debian's source, and QuickJS from npm, into /usr/local/lib/airlock/wasm.
wasm-runtimes:
	@scripts/wasm/build-python.sh
	@scripts/wasm/fetch-quickjs.sh

# The web console's assets (web/console: TypeScript and xterm.js, type-checked and bundled by
# esbuild, pinned by its package-lock.json) into internal/console/assets, which go build embeds.
# They are not committed; a binary built without them says at /ui how to build them.
console: sdk-typescript
	cd web/console && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund --loglevel=error; } && \
		npm run --silent check && npm run --silent build

# airlock-kube is airlock with the Kubernetes node (serve --kubeconfig runs it), kept out of
# airlock, which is every sandbox's init (docs/kubernetes.md). airlock-guest is the microvm
# guests' PID 1 and init, airlock's guest roles alone (docs/levels.md#microvm).
build: console
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/airlock
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(dir $(BIN))airlock-guest ./cmd/airlock-guest
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(dir $(BIN))airlock-kube ./cmd/airlock-kube

# The SDKs from their sources and api/openapi.json: the TypeScript one's dependencies (pinned by
# its package-lock.json) and build (sdk/typescript/dist), and the Python one's wheel
# (sdk/python/dist; its build backend is in the tree, so no index is needed). Neither is committed.
# The console is built on the TypeScript SDK's sources and generated types, so `make build` makes
# that one too.
sdk: sdk-typescript sdk-python

sdk-typescript:
	cd sdk/typescript && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund --loglevel=error; } && \
		npm run --silent build

sdk-python:
	cd sdk/python && python3 -m pip wheel --no-build-isolation --no-index --no-deps -q -w dist .

# The main job: set up, build, start airlock serve on loopback with a local data dir, create a
# first API key and print a copy-paste example (Ctrl-C stops it).
run: deps build sdk
	@$(BIN) doctor
	@scripts/quickstart.sh

# The one-shot runner, no daemon: a few sandboxes, a memory bomb among them.
demo: deps build
	@echo "\$$ airlock run --memory 256M --pids 64 --timeout 10s -- python3 -c 'print(\"hi\")'"
	@$(BIN) run --memory 256M --pids 64 --timeout 10s -- python3 -c 'print("hi")'
	@echo
	@echo "\$$ airlock run --memory 64M -- python3 -c 'bytearray(1<<30)'   # a memory bomb"
	@$(BIN) run --memory 64M -- python3 -c 'bytearray(1<<30)' || echo "(exit status $$? — killed by the memory limit)"

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	@$(MAKE) --no-print-directory lint

# errcheck and errorlint (.golangci.yml), with the pinned golangci-lint.
lint: golangci-lint
	$(GOLANGCI_LINT) run ./...

# Installs golangci-lint $(GOLANGCI_LINT_VERSION) unless that version is there already. The first
# build takes a few minutes; later ones (another worktree, say) come from Go's build cache.
golangci-lint:
	@$(GOLANGCI_LINT) version 2>/dev/null | grep -q ' version $(GOLANGCI_LINT_VERSION:v%=%) ' || { \
		echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into $(dir $(GOLANGCI_LINT))"; \
		rm -f $(GOLANGCI_LINT) && GOBIN=$(dir $(GOLANGCI_LINT)) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); }

# Every test. The sandbox tests need root (they create cgroups and namespaces); CI runs as root.
# AIRLOCK_TEST_REQUIRE_ROOT=1: a test that needs root fails instead of skipping (testutil.RequiresRoot).
# test/cluster needs the Kubernetes binaries: their build (about 15 minutes cold) starts first, in
# the background, and is waited for only before go test.
test: k8s-binaries-background deps vet build sdk k8s-binaries
	AIRLOCK_TEST_REQUIRE_ROOT=1 AIRLOCK_TEST_REQUIRE_K8S=1 $(GO) test -count=1 -timeout 30m ./...

# Startup speed beside bubblewrap and unshare, interleaved in one run, then the daemon's API
# beside a local sh (see docs/performance.md).
bench: deps build sdk
	$(GO) run ./test/bench -airlock $(BIN)
	$(GO) run ./test/bench/daemon -airlock $(BIN)
	$(GO) run ./test/bench/network
	$(GO) run ./test/bench/container -airlock $(BIN)
	$(GO) run ./test/bench/snapshot -airlock $(BIN)
	$(GO) run ./test/bench/audit -airlock $(BIN)
	$(GO) run ./test/bench/wasm -airlock $(BIN)
	$(GO) run ./test/bench/tools -airlock $(BIN)

# The exec round trip through the TypeScript and Python SDKs beside the Go SDK and curl.
bench-sdk: deps build sdk
	$(GO) run ./test/bench/sdk -airlock $(BIN)

# The tool gateway: an http tool's overhead beside a direct request to a local server, and
# run_code on a warm pool beside the same code through POST .../exec (docs/performance.md).
bench-tools: deps build
	$(GO) run ./test/bench/tools -airlock $(BIN)
	$(GO) test -run '^$$' -bench 'BenchmarkToolCall|BenchmarkCall' -benchtime 3000x ./internal/server ./internal/tools

bench-container: deps build
	$(GO) run ./test/bench/container -airlock $(BIN)

bench-snapshot: deps build
	$(GO) run ./test/bench/snapshot -n 10 -airlock $(BIN)

# The audit log: events/s into the hash-chained log, and exec round trips with audit on and off.
bench-audit: deps build
	$(GO) run ./test/bench/audit -airlock $(BIN)

# The wasm level: warm exec of print(1) and console.log(1) beside the process level, and the
# memory an idle wasm sandbox costs.
bench-wasm: deps build
	$(GO) run ./test/bench/wasm -airlock $(BIN)

# The microvm level: boot to ready vs a raw QEMU boot of the same kernel and initramfs, exec
# round trips vs the process level, the idle VMM's memory, restore from a memory snapshot, and a
# claim from a warm pool through the daemon (docs/levels.md#microvm-figures).
bench-microvm: deps build
	$(GO) run ./test/bench/microvm -airlock $(BIN)

# The front API of a local cluster (three airlock nodes) vs one node's own API: create→ready
# overhead, and 100 creates over three nodes vs one (docs/performance.md#kubernetes-the-front-api).
bench-cluster: k8s-binaries build
	$(GO) run ./test/bench/cluster -airlock $(BIN)

bench-network: deps
	$(GO) run ./test/bench/network

bench-daemon: deps build
	$(GO) run ./test/bench/daemon -airlock $(BIN)

# api/openapi.json: the API document the daemon serves, as the SDKs' generators read it. A test
# (internal/server TestOpenAPIFile) fails when it is stale.
openapi:
	$(GO) test ./internal/server -run '^TestOpenAPIFile$$' -update

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
