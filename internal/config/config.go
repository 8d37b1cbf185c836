// Package config is airlock's one configuration: a documented struct with usable defaults, loaded
// from a versioned JSON file, validated once at start. Flags override the file.
package config

import (
	"bytes"
	"cmp"
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
	"github.com/airlockrun/airlock/internal/tenancy"
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
	// Server bounds the API's connections and requests, so that clients without a key cannot
	// exhaust the daemon's file descriptors, memory or time.
	Server ServerConfig `json:"server"`
	// Process configures the process isolation level.
	Process ProcessConfig `json:"process"`
	// HostTemplate configures the host template (SPEC §3) of the process and container levels.
	HostTemplate HostTemplateConfig `json:"hostTemplate"`
	// Network configures sandboxes' networks (SPEC §4).
	Network NetworkConfig `json:"network"`
	// Container is the container level: OCI runtimes.
	Container ContainerConfig `json:"container"`
	// Images is the OCI image store under DataDir/images.
	Images ImagesConfig `json:"images"`
	// Wasm is the wasm level: where its interpreters are installed.
	Wasm WasmConfig `json:"wasm"`
	// Volumes are host directories the operator lends tenants by name (SPEC §3): a create's
	// volumes: [{name, path, readOnly}] mounts one the tenant was granted. The only way a host
	// path enters a sandbox through the API.
	Volumes map[string]VolumeConfig `json:"volumes"`
	// Templates are host directories used as a sandbox's root filesystem (copy-on-write, the
	// process level), by name: a create's template: NAME.
	Templates map[string]TemplateConfig `json:"templates"`
	// Tenants are the tenants' quotas: Defaults for every tenant, Overrides by tenant name.
	Tenants TenantsConfig `json:"tenants"`
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

// VolumeConfig is one volume: a host directory, whether every mount of it is read-only, and the
// tenants that may mount it ("*" for all).
type VolumeConfig struct {
	HostPath string   `json:"hostPath"`
	ReadOnly bool     `json:"readOnly"`
	Tenants  []string `json:"tenants"`
}

// TemplateConfig is one root filesystem template: a host directory and the tenants that may use
// it ("*" for all).
type TemplateConfig struct {
	Dir     string   `json:"dir"`
	Tenants []string `json:"tenants"`
}

// TenantsConfig holds the tenants' quotas (SPEC §0). A quota field left at zero takes the
// default's; Defaults' own zero fields are filled by Default().
type TenantsConfig struct {
	Defaults  api.Quota            `json:"defaults"`
	Overrides map[string]api.Quota `json:"overrides"`
}

// SecretConfig is one secret of the operator's: its value ("env:NAME" reads airlock's
// environment at start), the hosts it may be sent to (exact names or "*.example.com") and the
// tenants that may bind it to a credential ("*" for all).
type SecretConfig struct {
	Value   string   `json:"value"`
	Hosts   []string `json:"hosts"`
	Tenants []string `json:"tenants"`
}

// UnmarshalJSON refuses the bare-string form of earlier versions with a message that says what
// a secret needs now.
func (s *SecretConfig) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return errors.New("a secret is {\"value\": ..., \"hosts\": [...], \"tenants\": [...]}: it names the hosts it may be sent to and the tenants that may use it")
	}
	type plain SecretConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode((*plain)(s))
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
	// WorkerIdleSeconds is how long a wasm sandbox's worker (the jailed process that runs its
	// commands) stays after the sandbox's last exec (default 30); the next exec starts another.
	WorkerIdleSeconds int `json:"workerIdleSeconds"`
}

// ImagesConfig configures the image store.
type ImagesConfig struct {
	// MaxImageSizeMb caps an image's size, compressed and unpacked (default 8192).
	MaxImageSizeMb int64 `json:"maxImageSizeMb"`
	// Allowed are the image references tenants may use besides those already in the store
	// (seed 002's "approved image"): patterns where '*' stands for any run of characters,
	// e.g. "docker.io/library/python:*". Default none: tenants use what the operator pulled.
	Allowed []string `json:"allowed"`
	// Registries are the registry hosts a pull may reach (e.g. "ghcr.io", "docker.io");
	// default any.
	Registries []string `json:"registries"`
	// AllowPrivateNetworks lets pulls reach registries on loopback, private and link-local
	// addresses (a registry on the daemon's own host). Off by default, so that no image
	// reference makes the daemon dial into its own network; metadata addresses never.
	AllowPrivateNetworks bool `json:"allowPrivateNetworks"`
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
	// knowing them, each scoped to the hosts it may be sent to and the tenants that may use it
	// (any other binding is a 403 secret_not_granted). Keep the configuration file readable by
	// root only.
	Secrets map[string]SecretConfig `json:"secrets"`
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
	// MaxPools caps the warm pools made through the API; MaxPoolSandboxes the sandboxes all
	// pools keep warm together (the operator's, counted against no tenant). Defaults 16, 256.
	MaxPools         int `json:"maxPools"`
	MaxPoolSandboxes int `json:"maxPoolSandboxes"`
}

// ServerConfig bounds the HTTP API (docs/daemon.md, "Bounded for strangers"). A request
// without a valid key is held to every bound; a key holder's long work (an exec of many minutes,
// an upload of a GiB, a followed log) is bounded by its progress instead.
type ServerConfig struct {
	// ReadTimeoutSeconds bounds reading a request: its headers (within at most 10 s) and body
	// must arrive within it. A key holder's upload may take longer as long as data keeps coming:
	// it fails after this long without any. Default 60.
	ReadTimeoutSeconds int `json:"readTimeoutSeconds"`
	// WriteTimeoutSeconds bounds writing an answer once it is ready: the client must take it
	// within this long. The work before it (an exec, a pull) does not count; a stream (a
	// download, a followed log or events, a WebSocket) lasts as long as the client keeps
	// reading, and is cut after this long without progress. Default 60.
	WriteTimeoutSeconds int `json:"writeTimeoutSeconds"`
	// IdleTimeoutSeconds closes a keep-alive connection after this long without a request,
	// which frees its place under the connection caps. Default 60.
	IdleTimeoutSeconds int `json:"idleTimeoutSeconds"`
	// MaxHeaderBytes caps a request's line and headers (HTTP 431 beyond). Default 64 KiB.
	MaxHeaderBytes int `json:"maxHeaderBytes"`
	// MaxConnections caps the API's open connections, idle keep-alive ones and streams
	// included: past it a new connection is closed as soon as it is accepted. Keep it well under
	// the daemon's open-file limit (RLIMIT_NOFILE, raised to its hard limit at start), which
	// sandboxes use too. Default 4096.
	MaxConnections int `json:"maxConnections"`
	// MaxConnectionsPerClient caps the open connections from one client address (an IPv4
	// address, an IPv6 /64), so that one client cannot take every place; it must be below
	// MaxConnections. On loopback every local client is 127.0.0.1 or ::1. Default 512.
	MaxConnectionsPerClient int `json:"maxConnectionsPerClient"`
	// ShutdownGraceSeconds is how long a stopping daemon (SIGTERM) waits for requests in
	// flight before it closes their connections and ends every sandbox: an exec still running
	// then is killed and recorded with endedBy daemon_shutdown. Default 30; 0 does not wait.
	ShutdownGraceSeconds int `json:"shutdownGraceSeconds"`
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

// HostTemplateConfig configures the host template: the host's /usr, /bin and /lib* read-only,
// with /usr/local covered by an empty directory (operators keep their own software,
// configuration and secrets there).
type HostTemplateConfig struct {
	// Paths are more host paths the template binds read-only at the same place in every
	// sandbox, over the hidden /usr/local: e.g. "/usr/local/bin/tool" or "/opt/sdk". Absolute,
	// clean and present on the host; not / nor under /proc, /dev, /etc, /tmp, /workspace, /home,
	// /root or /.airlock (what the sandbox's own root has there). Default none.
	Paths []string `json:"paths"`
}

// Default returns the configuration airlock runs with when nothing is set.
func Default() Config {
	p := process.DefaultConfig()
	cd := container.DefaultConfig()
	return Config{
		Version:  Version,
		DataDir:  defaultDataDir(),
		Listen:   "127.0.0.1:7070",
		Database: DatabaseConfig{Sync: "normal"},
		Limits:   LimitsConfig{MaxSandboxesPerTenant: 100, MaxBodyBytes: 1 << 20, MaxUploadBytes: 1 << 30, MaxPools: 16, MaxPoolSandboxes: 256},
		Server: ServerConfig{ReadTimeoutSeconds: 60, WriteTimeoutSeconds: 60, IdleTimeoutSeconds: 60, MaxHeaderBytes: 64 << 10,
			MaxConnections: 4096, MaxConnectionsPerClient: 512, ShutdownGraceSeconds: 30},
		Process:   ProcessConfig{CgroupParent: p.CgroupParent, UIDBase: p.UIDBase, UIDRanges: uidalloc.DefaultRanges, OrphanGraceSeconds: 60},
		Container: ContainerConfig{Runtime: cd.Runtime, RunscPlatform: cd.RunscPlatform, CgroupParent: cd.CgroupParent, PrepareRestores: true},
		Images:    ImagesConfig{MaxImageSizeMb: image.DefaultMaxImageBytes >> 20},
		Wasm:      WasmConfig{RuntimeDir: wasm.DefaultRuntimeDir, WorkerIdleSeconds: int(wasm.DefaultWorkerIdle / time.Second)},
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
	if err := c.Server.validate(); err != nil {
		return err
	}
	if p := c.Process.CgroupParent; p == "" || filepath.IsAbs(p) || filepath.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("config: process.cgroupParent %q must be a clean relative cgroup path", c.Process.CgroupParent)
	}
	if err := c.HostTemplate.validate(); err != nil {
		return err
	}
	if g := c.Process.OrphanGraceSeconds; g < 0 || g > 3600 {
		return errors.New("config: process.orphanGraceSeconds must be between 0 and 3600")
	}
	if w := c.Wasm.WorkerIdleSeconds; w < 0 || w > 3600 {
		return errors.New("config: wasm.workerIdleSeconds must be between 0 (the default, 30) and 3600")
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
	if c.Limits.MaxPools < 1 || c.Limits.MaxPoolSandboxes < 1 {
		return errors.New("config: limits.maxPools and limits.maxPoolSandboxes must be ≥ 1")
	}
	if err := c.checkGrants(); err != nil {
		return err
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

// checkGrants validates what the operator lends tenants: names, absolute host directories that
// exist, tenant lists, quotas.
func (c Config) checkGrants() error {
	for n, v := range c.Volumes {
		if err := checkLoan("volumes", n, v.HostPath, v.Tenants); err != nil {
			return err
		}
	}
	for n, t := range c.Templates {
		if n == sandbox.TemplateHost {
			return errors.New("config: templates: \"host\" is the built-in template")
		}
		if err := checkLoan("templates", n, t.Dir, t.Tenants); err != nil {
			return err
		}
	}
	quotas := map[string]api.Quota{"defaults": c.Tenants.Defaults}
	for n, q := range c.Tenants.Overrides {
		if !api.ValidName(n) {
			return fmt.Errorf("config: tenants.overrides[%s]: a tenant name is 1-64 letters, digits, '.', '_' or '-'", n)
		}
		quotas["overrides["+n+"]"] = q
	}
	for where, q := range quotas {
		if q.MaxSandboxes < 0 || q.MaxMemoryMB < 0 || q.MaxDiskMB < 0 || q.RequestsPerSecond < 0 || q.Burst < 0 || q.MaxStoredMB < 0 {
			return fmt.Errorf("config: tenants.%s: quotas must not be negative", where)
		}
	}
	return nil
}

func (s ServerConfig) validate() error {
	for _, t := range []struct {
		name string
		v    int
	}{{"readTimeoutSeconds", s.ReadTimeoutSeconds}, {"writeTimeoutSeconds", s.WriteTimeoutSeconds}, {"idleTimeoutSeconds", s.IdleTimeoutSeconds}} {
		if t.v < 1 || t.v > 3600 {
			return fmt.Errorf("config: server.%s must be between 1 and 3600 (got %d)", t.name, t.v)
		}
	}
	if s.ShutdownGraceSeconds < 0 || s.ShutdownGraceSeconds > 3600 {
		return fmt.Errorf("config: server.shutdownGraceSeconds must be between 0 and 3600 (got %d)", s.ShutdownGraceSeconds)
	}
	if s.MaxHeaderBytes < 4<<10 || s.MaxHeaderBytes > 16<<20 {
		return fmt.Errorf("config: server.maxHeaderBytes must be between 4096 and 16777216 (got %d)", s.MaxHeaderBytes)
	}
	if s.MaxConnections < 2 || s.MaxConnectionsPerClient < 1 || s.MaxConnectionsPerClient >= s.MaxConnections {
		return fmt.Errorf("config: server.maxConnectionsPerClient (%d) must be ≥ 1 and below server.maxConnections (%d), "+
			"so that one client cannot take every connection", s.MaxConnectionsPerClient, s.MaxConnections)
	}
	return nil
}

// checkLoan checks one volume or template: a valid name, an absolute clean host directory that
// exists, a tenants list.
func checkLoan(kind, name, dir string, tenants []string) error {
	if !api.ValidName(name) {
		return fmt.Errorf("config: %s: %q is not a name (1-64 letters, digits, '.', '_' or '-')", kind, name)
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("config: %s[%s]: %q must be an absolute, clean host path", kind, name, dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("config: %s[%s]: %s is not a directory", kind, name, dir)
	}
	if len(tenants) == 0 {
		return fmt.Errorf("config: %s[%s]: name the tenants that may use it (tenants: [\"*\"] for all)", kind, name)
	}
	return nil
}

// Grants returns what the operator lends tenants and their quotas, for the manager.
func (c Config) Grants() *tenancy.Grants {
	g := &tenancy.Grants{Volumes: map[string]tenancy.Volume{}, Templates: map[string]tenancy.Template{},
		Secrets: map[string]tenancy.Secret{}, Quotas: map[string]api.Quota{},
		Images: tenancy.Images{Allowed: c.Images.Allowed, Registries: c.Images.Registries}}
	for n, v := range c.Volumes {
		g.Volumes[n] = tenancy.Volume{HostPath: v.HostPath, ReadOnly: v.ReadOnly, Tenants: v.Tenants}
	}
	for n, t := range c.Templates {
		g.Templates[n] = tenancy.Template{Dir: t.Dir, Tenants: t.Tenants}
	}
	for n, s := range c.Network.Secrets {
		g.Secrets[n] = tenancy.Secret{Hosts: s.Hosts, Tenants: s.Tenants}
	}
	g.Quota = c.quota(c.Tenants.Defaults)
	for n, q := range c.Tenants.Overrides {
		g.Quotas[n] = c.quota(q)
	}
	return g
}

// quota fills q's zero fields from the defaults: the configured ones, then the built-in ones
// (the sandbox quota times the per-sandbox defaults of memory and disk; 1000 requests/s; 10 GiB
// stored).
func (c Config) quota(q api.Quota) api.Quota {
	d := c.Tenants.Defaults
	n := c.Limits.MaxSandboxesPerTenant
	fill := func(v *int64, conf, builtin int64) {
		if *v == 0 {
			*v = cmp.Or(conf, builtin)
		}
	}
	if q.MaxSandboxes == 0 {
		q.MaxSandboxes = cmp.Or(d.MaxSandboxes, n)
	}
	fill(&q.MaxMemoryMB, d.MaxMemoryMB, int64(q.MaxSandboxes)*int64(sandbox.Limits.MemoryMB.Default))
	fill(&q.MaxDiskMB, d.MaxDiskMB, int64(q.MaxSandboxes)*int64(sandbox.Limits.DiskMB.Default))
	if q.RequestsPerSecond == 0 {
		q.RequestsPerSecond = cmp.Or(d.RequestsPerSecond, 1000)
	}
	if q.Burst == 0 {
		q.Burst = cmp.Or(d.Burst, 2*int(q.RequestsPerSecond)+1)
	}
	fill(&q.MaxStoredMB, d.MaxStoredMB, 10240)
	return q
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
	for name, sc := range n.Secrets {
		if len(sc.Hosts) == 0 || len(sc.Tenants) == 0 {
			return e, fmt.Errorf("config: network.secrets[%s]: name the hosts it may be sent to and the tenants that may use it (hosts, tenants)", name)
		}
		v := sc.Value
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
// (uidalloc.InstanceOf): its sandboxes' cgroups are under <cgroupParent>/<instance> of each level,
// its container state under /run/airlock/container/<instance>, and its uid ranges are recorded
// with it. The data dir is locked by its daemon, so no two daemons share an instance; the
// one-shot `airlock run` on a data dir is the same airlock as its daemon.
func (c Config) Instance() string { return uidalloc.InstanceOf(c.DataDir) }

// ContainerStateDir is where the container level of the airlock using dataDir keeps its bundles
// and the runtimes' state: under /run/airlock, not in the data dir, because runc's user namespace
// root must be able to traverse every directory above a sandbox's root, and the data dir is
// private (0700). One directory per data dir, so airlocks on different data dirs never meet.
func ContainerStateDir(dataDir string) string {
	return filepath.Join("/run/airlock/container", uidalloc.InstanceOf(dataDir))
}

// ImageStore returns the image store's directory and options.
func (c Config) ImageStore() (string, image.Options) {
	return filepath.Join(c.DataDir, "images"), image.Options{MaxImageBytes: c.Images.MaxImageSizeMb << 20}
}

// WasmDriver returns the wasm level's configuration.
func (c Config) WasmDriver() wasm.Config {
	return wasm.Config{RuntimeDir: c.Wasm.RuntimeDir, StateDir: filepath.Join(c.DataDir, "wasm"),
		WorkerIdle: time.Duration(c.Wasm.WorkerIdleSeconds) * time.Second}
}

// ProcessDriver returns the process level's configuration.
func (c Config) ProcessDriver() process.Config {
	p := process.DefaultConfig()
	p.CgroupParent = path.Join(c.Process.CgroupParent, c.Instance())
	p.UIDBase, p.UIDRanges, p.Instance = c.Process.UIDBase, c.Process.UIDRanges, c.Instance()
	p.StateDir = filepath.Join(c.DataDir, "process")
	p.OrphanGrace = time.Duration(c.Process.OrphanGraceSeconds) * time.Second
	p.HostPaths = c.HostTemplate.Paths
	return p
}

// templateReserved are the sandbox paths the host template's own root has: an operator's path
// may not go there.
var templateReserved = []string{"/proc", "/dev", "/etc", "/tmp", "/workspace", "/home", "/root", "/.airlock"}

func (h HostTemplateConfig) validate() error {
	for i, p := range h.Paths {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
			return fmt.Errorf("config: hostTemplate.paths[%d] %q must be a clean absolute path other than /", i, p)
		}
		for _, r := range templateReserved {
			if p == r || strings.HasPrefix(p, r+"/") {
				return fmt.Errorf("config: hostTemplate.paths[%d] %q: the sandbox's own %s is there", i, p, r)
			}
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("config: hostTemplate.paths[%d]: %w", i, err)
		}
	}
	return nil
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

// SealKeyPath is the file of the key that seals webhook secrets in the store (0600, made at the
// first start): the database alone does not give them away.
func (c Config) SealKeyPath() string { return filepath.Join(c.DataDir, "seal.key") }

// DatabasePath is the store's file.
func (c Config) DatabasePath() string { return filepath.Join(c.DataDir, "airlock.db") }
