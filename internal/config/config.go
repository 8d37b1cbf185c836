// Package config is airlock's one configuration: a documented struct with usable defaults, loaded
// from a versioned JSON file, validated once at start. Flags override the file.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/driver/container"
	"github.com/airlockrun/airlock/internal/driver/process"
	"github.com/airlockrun/airlock/internal/driver/wasm"
	"github.com/airlockrun/airlock/internal/image"
	"github.com/airlockrun/airlock/internal/netpolicy/egress"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/uidalloc"
)

// Version is the configuration file format this airlock reads.
const Version = 1

// Config is everything an operator can set.
type Config struct {
	// Version of the file format; 0 is taken as the current one.
	Version int `json:"version"`
	// DataDir holds airlock's state: the database, keys, logs. Default /var/lib/airlock as root,
	// ~/.local/share/airlock otherwise.
	DataDir string `json:"dataDir"`
	// Listen is the daemon's address. Default 127.0.0.1:7070.
	Listen string `json:"listen"`
	// TLS makes the daemon serve HTTPS. A Listen address that is not loopback requires it, or
	// Insecure.
	TLS TLSConfig `json:"tls"`
	// Insecure allows plain HTTP on a non-loopback address (API keys then cross the network in
	// the clear).
	Insecure bool `json:"insecure"`
	// Database configures the embedded SQLite store in DataDir.
	Database DatabaseConfig `json:"database"`
	// Limits are the daemon's quotas.
	Limits LimitsConfig `json:"limits"`
	// Process configures the process isolation level.
	Process ProcessConfig `json:"process"`
	// Network configures sandboxes' networks (SPEC §4).
	Network NetworkConfig `json:"network"`
	// Container is the container level: OCI runtimes.
	Container ContainerConfig `json:"container"`
	// Images is the OCI image store under DataDir/images.
	Images ImagesConfig `json:"images"`
	// Wasm is the wasm level: where its interpreters are installed.
	Wasm WasmConfig `json:"wasm"`
	// Pools are warm pools the daemon keeps from its start (see api.Pool: name, spec, size,
	// refillPerSecond, maxAgeSeconds). Pools can also be made through the API; those are stored
	// in the database, and one of a name given here is ignored.
	Pools []api.Pool `json:"pools"`
	// Webhooks configures the delivery of events to the tenants' webhooks.
	Webhooks WebhooksConfig `json:"webhooks"`
	// Audit configures the audit log (internal/audit): every event, hash-chained.
	Audit AuditConfig `json:"audit"`
	// LogFormat is the daemon's own log: text (default) or json (slog's JSON handler; records
	// about a sandbox carry its sandbox, tenant and exec IDs as fields).
	LogFormat string `json:"logFormat"`
}

// AuditConfig configures the audit log.
type AuditConfig struct {
	// Disabled stores no events (the events API then answers empty pages; webhooks, metrics
	// and the logs stream still get every event). For measuring audit's cost, not production.
	Disabled bool `json:"disabled"`
	// RetentionDays removes events older than this many days, oldest first, keeping the
	// remaining chain verifiable from the last one removed (0: keep every event).
	RetentionDays int `json:"retentionDays"`
	// MaxEvents removes the oldest events beyond this many (0: no cap).
	MaxEvents int64 `json:"maxEvents"`
}

// WebhooksConfig configures webhook deliveries (internal/webhook).
type WebhooksConfig struct {
	// AllowPrivateNetworks lets webhooks reach loopback, private (RFC 1918, fc00::/7), CGNAT and
	// link-local addresses, e.g. a receiver on the daemon's own host. Off by default, so that a
	// tenant cannot make the daemon probe its own network. Cloud metadata addresses are never
	// reached.
	AllowPrivateNetworks bool `json:"allowPrivateNetworks"`
	// MaxAttempts is how many times a delivery is tried before it fails (default 8, at most 50).
	MaxAttempts int `json:"maxAttempts"`
	// TimeoutSeconds bounds one attempt: connecting, sending and reading the answer (default 10,
	// at most 300).
	TimeoutSeconds int `json:"timeoutSeconds"`
	// QueueSize is how many deliveries may wait in memory to be recorded; beyond it they are
	// dropped (and counted as such). Default 10000.
	QueueSize int `json:"queueSize"`
}

// ContainerConfig configures the container level.
type ContainerConfig struct {
	// Runtime is the runtime of sandboxes that name none: runsc (gVisor, default) or runc.
	Runtime string `json:"runtime"`
	// Runsc and Runc are the runtimes' binaries; empty means found in PATH.
	Runsc string `json:"runsc"`
	Runc  string `json:"runc"`
	// RunscPlatform is gVisor's platform: systrap (default), ptrace or kvm.
	RunscPlatform string `json:"runscPlatform"`
	// CgroupParent is where the runtimes make sandboxes' cgroups.
	CgroupParent string `json:"cgroupParent"`
	// PrepareRestores (default true): once a runsc sandbox has a memory snapshot, the container
	// its next in-place restore goes into is made ahead (`runsc create`), so that the restore
	// only loads the image. It costs an idle gVisor sandbox per such sandbox.
	PrepareRestores bool `json:"prepareRestores"`
}

// WasmConfig configures the wasm level.
type WasmConfig struct {
	// RuntimeDir holds the WebAssembly interpreters as scripts/wasm/*.sh install them:
	// python/ and quickjs/ (default /usr/local/lib/airlock/wasm). Their compiled code is cached
	// in DataDir/wasm/cache.
	RuntimeDir string `json:"runtimeDir"`
}

// ImagesConfig configures the image store.
type ImagesConfig struct {
	// MaxImageSizeMb caps an image's size, compressed and unpacked (default 8192).
	MaxImageSizeMb int64 `json:"maxImageSizeMb"`
}

// NetworkConfig is the operator's part of every sandbox's network policy.
type NetworkConfig struct {
	// Pool is the IPv4 prefix from which each networked sandbox gets a /30 (its veth pair).
	// Default 10.200.0.0/16 (16384 sandboxes). It must not overlap the host's networks.
	Pool string `json:"pool"`
	// Resolvers are the upstream DNS servers ("ip:port") airlock asks for allowed names.
	// Default: the host's /etc/resolv.conf.
	Resolvers []string `json:"resolvers"`
	// TrustedHosts maps names to addresses (several separated by commas), bypassing DNS, e.g.
	// an internal LLM gateway on a private address. Only these names may lead to private
	// addresses, and only for sandboxes whose policy allows the name; metadata addresses never.
	TrustedHosts map[string]string `json:"trustedHosts"`
	// Secrets are credential values sandboxes may name (network.credentials[].secret) without
	// knowing them. A value "env:NAME" is read from airlock's environment at start. Keep the
	// configuration file readable by root only.
	Secrets map[string]string `json:"secrets"`
	// UpstreamCAFile is a PEM bundle trusted, besides the system's roots, when airlock speaks
	// TLS upstream to inject credentials (e.g. a corporate CA).
	UpstreamCAFile string `json:"upstreamCaFile"`
}

// TLSConfig names the daemon's certificate and key (PEM files).
type TLSConfig struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// DatabaseConfig configures the store.
type DatabaseConfig struct {
	// Sync is "normal" (default: a committed record survives a crash or kill -9 of the daemon,
	// not a power loss) or "full" (fsync on every commit: survives power loss; slower execs).
	Sync string `json:"sync"`
}

// LimitsConfig are the daemon's quotas.
type LimitsConfig struct {
	// MaxSandboxesPerTenant caps a tenant's live sandboxes (HTTP 429 beyond). Default 100.
	MaxSandboxesPerTenant int `json:"maxSandboxesPerTenant"`
	// MaxBodyBytes caps a JSON request body (HTTP 413 beyond). Default 1 MiB.
	MaxBodyBytes int64 `json:"maxBodyBytes"`
	// MaxUploadBytes caps one upload of the files API. Default 1 GiB.
	MaxUploadBytes int64 `json:"maxUploadBytes"`
}

// ProcessConfig is the file form of process.Config.
type ProcessConfig struct {
	// CgroupParent is the cgroup under which every sandbox's cgroup is made. Default "airlock".
	CgroupParent string `json:"cgroupParent"`
	// UIDBase is where the pool of host uids/gids that sandboxes' ids are mapped to starts (at the
	// first multiple of 65536 at or above it). Every live sandbox, process or container level,
	// gets a range of 65536 of its own, disjoint from every other sandbox's on the host, this
	// daemon's or another airlock's (records in /run/airlock/uids). Default 2000000000; the pool
	// must not hold real host users.
	UIDBase uint32 `json:"uidBase"`
	// UIDRanges is the pool's size in ranges of 65536: the most sandboxes this airlock runs at
	// once. Default 4096 (host ids 2000027648 to 2268463103).
	UIDRanges int `json:"uidRanges"`
	// OrphanGraceSeconds is how long a daemon's sandbox outlives the daemon (a crash, kill -9)
	// waiting for the restarted daemon to adopt it; then it ends. Default 60; 0 ends sandboxes
	// with the daemon. The one-shot `airlock run` always uses 0.
	OrphanGraceSeconds int `json:"orphanGraceSeconds"`
}

// Default returns the configuration airlock runs with when nothing is set.
func Default() Config {
	p := process.DefaultConfig()
	cd := container.DefaultConfig()
	return Config{
		Version:   Version,
		DataDir:   defaultDataDir(),
		Listen:    "127.0.0.1:7070",
		Database:  DatabaseConfig{Sync: "normal"},
		Limits:    LimitsConfig{MaxSandboxesPerTenant: 100, MaxBodyBytes: 1 << 20, MaxUploadBytes: 1 << 30},
		Process:   ProcessConfig{CgroupParent: p.CgroupParent, UIDBase: p.UIDBase, UIDRanges: process.DefaultUIDRanges, OrphanGraceSeconds: 60},
		Container: ContainerConfig{Runtime: cd.Runtime, RunscPlatform: cd.RunscPlatform, CgroupParent: cd.CgroupParent, PrepareRestores: true},
		Images:    ImagesConfig{MaxImageSizeMb: image.DefaultMaxImageBytes >> 20},
		Wasm:      WasmConfig{RuntimeDir: wasm.DefaultRuntimeDir},
		Webhooks:  WebhooksConfig{MaxAttempts: 8, TimeoutSeconds: 10, QueueSize: 10000},
	}
}

func defaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/airlock"
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "airlock")
	}
	return filepath.Join(os.TempDir(), "airlock")
}

// Load reads a configuration file over the defaults. Unknown fields are an error, so a typo is
// not silently ignored.
func Load(path string) (Config, error) {
	c := Default()
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, c.Validate()
}

// Validate checks the configuration once, at start.
func (c Config) Validate() error {
	if c.Version != 0 && c.Version != Version {
		return fmt.Errorf("config: version %d is not supported (this airlock reads version %d)", c.Version, Version)
	}
	if c.DataDir == "" || !filepath.IsAbs(c.DataDir) {
		return fmt.Errorf("config: dataDir %q must be an absolute path", c.DataDir)
	}
	if err := c.checkListen(); err != nil {
		return err
	}
	if c.Audit.RetentionDays < 0 || c.Audit.MaxEvents < 0 {
		return fmt.Errorf("config: audit.retentionDays and audit.maxEvents must not be negative")
	}
	if c.LogFormat != "" && c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("config: logFormat must be text or json (got %q)", c.LogFormat)
	}
	if c.Database.Sync != "normal" && c.Database.Sync != "full" {
		return fmt.Errorf("config: database.sync must be normal or full (got %q)", c.Database.Sync)
	}
	if c.Limits.MaxSandboxesPerTenant < 1 || c.Limits.MaxBodyBytes < 1024 || c.Limits.MaxUploadBytes < 1 {
		return errors.New("config: limits.maxSandboxesPerTenant must be ≥ 1, maxBodyBytes ≥ 1024 and maxUploadBytes ≥ 1")
	}
	if p := c.Process.CgroupParent; p == "" || filepath.IsAbs(p) || filepath.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("config: process.cgroupParent %q must be a clean relative cgroup path", c.Process.CgroupParent)
	}
	if g := c.Process.OrphanGraceSeconds; g < 0 || g > 3600 {
		return errors.New("config: process.orphanGraceSeconds must be between 0 and 3600")
	}
	if r := c.Container.Runtime; r != sandbox.RuntimeRunsc && r != sandbox.RuntimeRunc {
		return fmt.Errorf("config: container.runtime must be runsc or runc (got %q)", r)
	}
	if p := c.Container.RunscPlatform; p != "systrap" && p != "ptrace" && p != "kvm" {
		return fmt.Errorf("config: container.runscPlatform must be systrap, ptrace or kvm (got %q)", p)
	}
	if p := c.Container.CgroupParent; p == "" || filepath.IsAbs(p) || filepath.Clean(p) != p || strings.HasPrefix(p, "..") || p == c.Process.CgroupParent {
		return fmt.Errorf("config: container.cgroupParent %q must be a clean relative cgroup path other than process.cgroupParent", p)
	}
	if c.Images.MaxImageSizeMb < 1 {
		return errors.New("config: images.maxImageSizeMb must be ≥ 1")
	}
	if w := c.Webhooks; w.MaxAttempts < 1 || w.MaxAttempts > 50 {
		return fmt.Errorf("config: webhooks.maxAttempts must be between 1 and 50 (got %d)", w.MaxAttempts)
	} else if w.TimeoutSeconds < 1 || w.TimeoutSeconds > 300 {
		return fmt.Errorf("config: webhooks.timeoutSeconds must be between 1 and 300 (got %d)", w.TimeoutSeconds)
	} else if w.QueueSize < 1 {
		return fmt.Errorf("config: webhooks.queueSize must be ≥ 1 (got %d)", w.QueueSize)
	}
	if err := uidalloc.Check(c.Process.UIDBase, c.Process.UIDRanges); err != nil {
		return fmt.Errorf("config: process.uidBase and process.uidRanges: %w", err)
	}
	if _, err := c.Egress(); err != nil {
		return err
	}
	return nil
}

// Egress returns the network service's configuration.
func (c Config) Egress() (egress.Config, error) {
	n := c.Network
	e := egress.Config{Resolvers: n.Resolvers, UpstreamCAFile: n.UpstreamCAFile, Secrets: map[string]string{}}
	if n.Pool != "" {
		p, err := netip.ParsePrefix(n.Pool)
		if err != nil {
			return e, fmt.Errorf("config: network.pool %q: %v", n.Pool, err)
		}
		e.Pool = p
	}
	for i, r := range n.Resolvers {
		if _, err := netip.ParseAddrPort(r); err != nil {
			return e, fmt.Errorf("config: network.resolvers[%d] %q: want IP:PORT", i, r)
		}
	}
	for name, addrs := range n.TrustedHosts {
		if e.Trusted == nil {
			e.Trusted = map[string][]netip.Addr{}
		}
		for _, a := range strings.Split(addrs, ",") {
			ip, err := netip.ParseAddr(strings.TrimSpace(a))
			if err != nil {
				return e, fmt.Errorf("config: network.trustedHosts[%s] %q: not an IP address", name, a)
			}
			e.Trusted[name] = append(e.Trusted[name], ip)
		}
	}
	for name, v := range n.Secrets {
		if env, ok := strings.CutPrefix(v, "env:"); ok {
			var set bool
			if v, set = os.LookupEnv(env); !set {
				return e, fmt.Errorf("config: network.secrets[%s]: environment variable %s is not set", name, env)
			}
		}
		e.Secrets[name] = v
	}
	return e, nil
}

// ContainerDriver returns the container level's configuration (its network and images are
// attached by package levels).
func (c Config) ContainerDriver() container.Config {
	d := container.DefaultConfig()
	d.Runtime, d.Runsc, d.Runc, d.RunscPlatform = c.Container.Runtime, c.Container.Runsc, c.Container.Runc, c.Container.RunscPlatform
	d.CgroupParent = path.Join(c.Container.CgroupParent, c.Instance())
	d.NoPreparedRestores = !c.Container.PrepareRestores
	d.StateDir = ContainerStateDir(c.DataDir)
	return d
}

// Instance names the airlock using this data dir among the airlocks of the host
// (process.InstanceOf): its sandboxes' cgroups are under <cgroupParent>/<instance> of each level,
// its container state under /run/airlock/container/<instance>, and its uid ranges are recorded
// with it. The data dir is locked by its daemon, so no two daemons share an instance; the
// one-shot `airlock run` on a data dir is the same airlock as its daemon.
func (c Config) Instance() string { return process.InstanceOf(c.DataDir) }

// ContainerStateDir is where the container level of the airlock using dataDir keeps its bundles
// and the runtimes' state: under /run/airlock, not in the data dir, because runc's user namespace
// root must be able to traverse every directory above a sandbox's root, and the data dir is
// private (0700). One directory per data dir, so airlocks on different data dirs never meet.
func ContainerStateDir(dataDir string) string {
	return filepath.Join("/run/airlock/container", process.InstanceOf(dataDir))
}

// ImageStore returns the image store's directory and options.
func (c Config) ImageStore() (string, image.Options) {
	return filepath.Join(c.DataDir, "images"), image.Options{MaxImageBytes: c.Images.MaxImageSizeMb << 20}
}

// WasmDriver returns the wasm level's configuration.
func (c Config) WasmDriver() wasm.Config {
	return wasm.Config{RuntimeDir: c.Wasm.RuntimeDir, StateDir: filepath.Join(c.DataDir, "wasm")}
}

// ProcessDriver returns the process level's configuration.
func (c Config) ProcessDriver() process.Config {
	p := process.DefaultConfig()
	p.CgroupParent = path.Join(c.Process.CgroupParent, c.Instance())
	p.UIDBase, p.UIDRanges, p.Instance = c.Process.UIDBase, c.Process.UIDRanges, c.Instance()
	p.StateDir = filepath.Join(c.DataDir, "process")
	p.OrphanGrace = time.Duration(c.Process.OrphanGraceSeconds) * time.Second
	return p
}

// checkListen refuses to send API keys in the clear over a network: a non-loopback address needs
// TLS or an explicit Insecure.
func (c Config) checkListen() error {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("config: listen %q: want HOST:PORT, e.g. 127.0.0.1:7070", c.Listen)
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return errors.New("config: tls.cert and tls.key go together")
	}
	if c.TLS.Cert != "" || c.Insecure {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("config: listen %q is not a loopback address: serve TLS (--tls-cert/--tls-key) or pass --insecure to send API keys in the clear", c.Listen)
}

// DatabasePath is the store's file.
func (c Config) DatabasePath() string { return filepath.Join(c.DataDir, "airlock.db") }
