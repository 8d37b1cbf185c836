// Package config is the daemon's own part of airlock's configuration: a documented struct with
// usable defaults, read from a versioned JSON file, validated once at start. Flags override the
// file. The sections of the isolation levels, the image store and the network ("process",
// "container", ...) are their packages' own types; package levels composes them with this one
// into the whole file, so that this package stays a leaf that knows no level.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/tenancy"
)

// Version is the configuration file format this airlock reads.
const Version = 1

// Config is what an operator sets of the daemon itself; levels.Config adds the levels' sections.
type Config struct {
	// Version of the file format; 0 is taken as the current one.
	Version int `json:"version"`
	// DataDir holds airlock's state: the database, keys, logs. Default /var/lib/airlock as root,
	// ~/.local/share/airlock otherwise.
	DataDir string `json:"dataDir"`
	// Listen is the daemon's address. Default 127.0.0.1:7070.
	Listen string `json:"listen"`
	// PublicURL is the address clients reach the daemon by, when it is not the one they send in
	// each request (a reverse proxy, a load balancer): http(s)://HOST[:PORT][/PREFIX]. A
	// sandbox's endpoints are absolute URLs that start with it (exec and logs with ws:// or
	// wss://). Empty (the default): each answer builds them from the request's Host and whether
	// it came over TLS.
	PublicURL string `json:"publicUrl"`
	// Defaults are what a create leaves out and the operator chooses.
	Defaults DefaultsConfig `json:"defaults"`
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
	// Volumes are host directories the operator lends tenants by name (docs/levels.md#filesystem): a create's
	// volumes: [{name, path, readOnly}] mounts one the tenant was granted. The only way a host
	// path enters a sandbox through the API.
	Volumes map[string]VolumeConfig `json:"volumes"`
	// Templates are host directories used as a sandbox's root filesystem (copy-on-write, the
	// process level), by name: a create's template: NAME.
	Templates map[string]TemplateConfig `json:"templates"`
	// Agents are agents tenants name by ID: a create with agentId: NAME and no agent of its own
	// runs this one's command when started (seed 000's create({agentId}), then start()).
	Agents map[string]AgentConfig `json:"agents"`
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
	// Tools configures the tool gateway (docs/tools.md): the operator's tools, upstream MCP
	// servers and policies, where the built-in tools run, and what each tenant may define.
	Tools ToolsConfig `json:"tools"`
	// LogFormat is the daemon's own log: text (default) or json (slog's JSON handler; records
	// about a sandbox carry its sandbox, tenant and exec IDs as fields).
	LogFormat string `json:"logFormat"`
}

// DefaultsConfig holds the operator's defaults for new sandboxes.
type DefaultsConfig struct {
	// Isolation is the level of a sandbox whose create names none, through the API (both
	// surfaces), `airlock create` and `airlock run`: container (the default, gVisor's runsc,
	// docs/levels.md#isolation-levels), process, wasm, microvm or enclave. A level this host lacks is not replaced by
	// another: such a create is refused (422) saying how to fix it.
	Isolation string `json:"isolation"`
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

// AgentConfig is one agent of the operator's: the command a sandbox of its agentId runs when
// started (a string run by /bin/sh -c, or an argv array), the variables it adds, its working
// directory inside the sandbox (default the sandbox's), and the tenants that may name it ("*"
// for all).
type AgentConfig struct {
	Command api.Command       `json:"command"`
	Env     map[string]string `json:"env"`
	Workdir string            `json:"workdir"`
	Tenants []string          `json:"tenants"`
}

// TenantsConfig holds the tenants' quotas (docs/security.md#who-is-trusted-with-what). A quota field left at zero takes its
// plan's (quota.plan, or else Defaults.plan), then the default's; Defaults' own zero fields are
// filled by Default().
type TenantsConfig struct {
	Defaults  api.Quota            `json:"defaults"`
	Overrides map[string]api.Quota `json:"overrides"`
	// Plans are named quotas that a tenant's quota names with plan (overrides.NAME.plan, or
	// defaults.plan for every tenant). BuiltinPlans are there unless redefined here.
	Plans map[string]api.Quota `json:"plans"`
}

// BuiltinPlans are the plans every configuration has: seed 002's free plan, up to 3 concurrent
// sandboxes (a 4th create is a 429).
var BuiltinPlans = map[string]api.Quota{"free": {MaxSandboxes: 3}}

// plan returns the plan called name: the configuration's, else a built-in one.
func (t TenantsConfig) plan(name string) (api.Quota, bool) {
	if p, ok := t.Plans[name]; ok {
		return p, true
	}
	p, ok := BuiltinPlans[name]
	return p, ok
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

// ToolsConfig configures the tool gateway (docs/tools.md). The zero value serves the built-in
// tools (run_code, read_file, write_file, list_files, http_fetch) in a sandbox per caller, and
// lets tenants define tools, servers and policies within the limits' defaults.
type ToolsConfig struct {
	// Disabled turns the gateway off: the tool routes and /mcp answer 503.
	Disabled bool `json:"disabled"`
	// Tools are the operator's tools, each granted to the tenants it names ("*" for all). They
	// may use every backend, the daemon's own egress (http.egress daemon) included.
	Tools []ToolConfig `json:"tools"`
	// Servers are the operator's upstream MCP servers: a command run in a sandbox of each
	// tenant that uses it, or a URL that the daemon dials (the operator's alone), with headers
	// sent to it (never shown).
	Servers []ToolServerConfig `json:"servers"`
	// Policies are the operator's tool policies; tenant "*" binds every tenant. Tenants and
	// admin keys add theirs through the API.
	Policies []api.ToolPolicy `json:"policies"`
	// Workspace is where the built-in tools run when a call names no sandbox: a sandbox
	// (sandboxId of a name), a pool, or a spec, with its reuse (default: a sandbox per caller,
	// 512 MiB, no network, ended after 10 idle minutes).
	Workspace *api.ToolSandbox `json:"workspace"`
	// Builtins turns built-in tools off, or gives one its own sandbox or rate limit, by name.
	Builtins map[string]BuiltinToolConfig `json:"builtins"`
	// Limits bound what each tenant defines and what a call returns.
	Limits ToolLimitsConfig `json:"limits"`
}

// ToolConfig is one of the operator's tools and the tenants that may call it.
type ToolConfig struct {
	api.ToolDefinition
	Tenants []string `json:"tenants"`
}

// ToolServerConfig is one of the operator's upstream MCP servers, the tenants that may use it,
// and, for a URL server, the headers sent with every request (its credentials).
type ToolServerConfig struct {
	api.ToolServer
	Headers map[string]string `json:"headers"`
	Tenants []string          `json:"tenants"`
}

// BuiltinToolConfig changes one built-in tool.
type BuiltinToolConfig struct {
	Disabled  bool             `json:"disabled"`
	Sandbox   *api.ToolSandbox `json:"sandbox"`
	RateLimit string           `json:"rateLimit"`
}

// ToolLimitsConfig bounds the tool gateway per tenant; zero takes the default.
type ToolLimitsConfig struct {
	// MaxToolsPerTenant, MaxServersPerTenant and MaxPoliciesPerTenant cap what one tenant
	// defines through the API (defaults 64, 8, 64; 429 beyond).
	MaxToolsPerTenant    int `json:"maxToolsPerTenant"`
	MaxServersPerTenant  int `json:"maxServersPerTenant"`
	MaxPoliciesPerTenant int `json:"maxPoliciesPerTenant"`
	// MaxSchemaBytes caps a tool's input schema as JSON (default 65536; 413 beyond).
	MaxSchemaBytes int `json:"maxSchemaBytes"`
	// MaxResultBytes caps a result's text and what read_file and http tools read (default 1 MiB).
	MaxResultBytes int `json:"maxResultBytes"`
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

// Default returns the configuration airlock runs with when nothing is set.
func Default() Config {
	return Config{
		Version:  Version,
		DataDir:  defaultDataDir(),
		Listen:   "127.0.0.1:7070",
		Defaults: DefaultsConfig{Isolation: sandbox.DefaultIsolation},
		Database: DatabaseConfig{Sync: "normal"},
		Limits:   LimitsConfig{MaxSandboxesPerTenant: 100, MaxBodyBytes: 1 << 20, MaxUploadBytes: 1 << 30, MaxPools: 16, MaxPoolSandboxes: 256},
		Server: ServerConfig{ReadTimeoutSeconds: 60, WriteTimeoutSeconds: 60, IdleTimeoutSeconds: 60, MaxHeaderBytes: 64 << 10,
			MaxConnections: 4096, MaxConnectionsPerClient: 512, ShutdownGraceSeconds: 30},
		Webhooks: WebhooksConfig{MaxAttempts: 8, TimeoutSeconds: 10, QueueSize: 10000},
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

// Read decodes the configuration file at path over into, a pointer to the defaults: a *Config, or
// the whole file's type (levels.Config), which embeds a Config. Unknown fields are an error naming
// the field's path, so that a typo is not silently ignored. The caller validates.
func Read(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := decodeStrict(b, into); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
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
	if err := checkPublicURL(c.PublicURL); err != nil {
		return err
	}
	if !slices.Contains(sandbox.Levels, c.Defaults.Isolation) {
		return fmt.Errorf("config: defaults.isolation must be one of %s (got %q)", strings.Join(sandbox.Levels, ", "), c.Defaults.Isolation)
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
	if c.Limits.MaxPools < 1 || c.Limits.MaxPoolSandboxes < 1 {
		return errors.New("config: limits.maxPools and limits.maxPoolSandboxes must be ≥ 1")
	}
	if err := c.checkGrants(); err != nil {
		return err
	}
	if l := c.Tools.Limits; l.MaxToolsPerTenant < 0 || l.MaxServersPerTenant < 0 || l.MaxPoliciesPerTenant < 0 || l.MaxSchemaBytes < 0 || l.MaxResultBytes < 0 {
		return errors.New("config: tools.limits must not be negative")
	}
	if w := c.Webhooks; w.MaxAttempts < 1 || w.MaxAttempts > 50 {
		return fmt.Errorf("config: webhooks.maxAttempts must be between 1 and 50 (got %d)", w.MaxAttempts)
	} else if w.TimeoutSeconds < 1 || w.TimeoutSeconds > 300 {
		return fmt.Errorf("config: webhooks.timeoutSeconds must be between 1 and 300 (got %d)", w.TimeoutSeconds)
	} else if w.QueueSize < 1 {
		return fmt.Errorf("config: webhooks.queueSize must be ≥ 1 (got %d)", w.QueueSize)
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
	for n, a := range c.Agents {
		if !api.ValidName(n) {
			return fmt.Errorf("config: agents: %q is not a name (1-64 letters, digits, '.', '_' or '-')", n)
		}
		if len(a.Command) == 0 || a.Command[0] == "" {
			return fmt.Errorf("config: agents[%s].command: the agent's command is required", n)
		}
		if a.Workdir != "" && !path.IsAbs(a.Workdir) {
			return fmt.Errorf("config: agents[%s].workdir: %q must be an absolute path inside the sandbox", n, a.Workdir)
		}
		if len(a.Tenants) == 0 {
			return fmt.Errorf("config: agents[%s]: name the tenants that may use it (tenants: [\"*\"] for all)", n)
		}
	}
	quotas := map[string]api.Quota{"defaults": c.Tenants.Defaults}
	for n, q := range c.Tenants.Overrides {
		if !api.ValidName(n) {
			return fmt.Errorf("config: tenants.overrides[%s]: a tenant name is 1-64 letters, digits, '.', '_' or '-'", n)
		}
		quotas["overrides["+n+"]"] = q
	}
	for n, q := range c.Tenants.Plans {
		if !api.ValidName(n) {
			return fmt.Errorf("config: tenants.plans[%s]: a plan name is 1-64 letters, digits, '.', '_' or '-'", n)
		}
		if q.Plan != "" {
			return fmt.Errorf("config: tenants.plans[%s]: a plan does not name another plan", n)
		}
		quotas["plans["+n+"]"] = q
	}
	for where, q := range quotas {
		if q.MaxSandboxes < 0 || q.MaxMemoryMB < 0 || q.MaxDiskMB < 0 || q.RequestsPerSecond < 0 || q.Burst < 0 || q.MaxStoredMB < 0 {
			return fmt.Errorf("config: tenants.%s: quotas must not be negative", where)
		}
		if _, ok := c.Tenants.plan(q.Plan); q.Plan != "" && !ok {
			return fmt.Errorf("config: tenants.%s: plan %q is neither in tenants.plans nor built in (free)", where, q.Plan)
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

// Grants returns what the operator lends tenants in this part of the file (volumes, templates)
// and their quotas; levels.Config.Grants adds the images and secrets of the sections.
func (c Config) Grants() *tenancy.Grants {
	g := &tenancy.Grants{Volumes: map[string]tenancy.Volume{}, Templates: map[string]tenancy.Template{},
		Secrets: map[string]tenancy.Secret{}, Agents: map[string]tenancy.Agent{}, Quotas: map[string]api.Quota{}}
	for n, v := range c.Volumes {
		g.Volumes[n] = tenancy.Volume{HostPath: v.HostPath, ReadOnly: v.ReadOnly, Tenants: v.Tenants}
	}
	for n, t := range c.Templates {
		g.Templates[n] = tenancy.Template{Dir: t.Dir, Tenants: t.Tenants}
	}
	for n, a := range c.Agents {
		g.Agents[n] = tenancy.Agent{Agent: api.Agent{Command: a.Command, Env: a.Env, Workdir: a.Workdir}, Tenants: a.Tenants}
	}
	g.Quota = c.quota(c.Tenants.Defaults)
	for n, q := range c.Tenants.Overrides {
		g.Quotas[n] = c.quota(q)
	}
	return g
}

// quota fills q's zero fields from its plan (q's own, else the defaults'), then the configured
// defaults, then the built-in ones (the sandbox quota times the per-sandbox defaults of memory
// and disk; 1000 requests/s; 10 GiB stored).
func (c Config) quota(q api.Quota) api.Quota {
	d := c.Tenants.Defaults
	n := c.Limits.MaxSandboxesPerTenant
	q.Plan = cmp.Or(q.Plan, d.Plan)
	if p, ok := c.Tenants.plan(q.Plan); ok {
		q.MaxSandboxes = cmp.Or(q.MaxSandboxes, p.MaxSandboxes)
		q.MaxMemoryMB = cmp.Or(q.MaxMemoryMB, p.MaxMemoryMB)
		q.MaxDiskMB = cmp.Or(q.MaxDiskMB, p.MaxDiskMB)
		q.RequestsPerSecond = cmp.Or(q.RequestsPerSecond, p.RequestsPerSecond)
		q.Burst = cmp.Or(q.Burst, p.Burst)
		q.MaxStoredMB = cmp.Or(q.MaxStoredMB, p.MaxStoredMB)
	}
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

// checkPublicURL checks publicUrl: empty, or http(s)://HOST[:PORT][/PREFIX] without query,
// fragment or credentials.
func checkPublicURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("config: publicUrl %q: want http(s)://HOST[:PORT][/PREFIX], e.g. https://airlock.example.com", s)
	}
	return nil
}

// SealKeyPath is the file of the key that seals webhook secrets in the store (0600, made at the
// first start): the database alone does not give them away.
func (c Config) SealKeyPath() string { return filepath.Join(c.DataDir, "seal.key") }

// DatabasePath is the store's file.
func (c Config) DatabasePath() string { return filepath.Join(c.DataDir, "airlock.db") }
