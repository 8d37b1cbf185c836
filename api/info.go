package api

import "time"

// FileInfo describes one file inside a sandbox.
type FileInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Type    string    `json:"type" enum:"file,dir,symlink,other"` // file, dir, symlink, other
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"` // permission bits in octal, e.g. "0644"
	ModTime time.Time `json:"modTime"`
	// Target is where a symlink points.
	Target string `json:"target,omitempty"`
}

// File types of FileInfo.Type.
const (
	FileRegular = "file"
	FileDir     = "dir"
	FileSymlink = "symlink"
	FileOther   = "other"
)

// MetricsSample is one reading of a sandbox's kernel counters.
type MetricsSample struct {
	Time time.Time `json:"time"`
	// CPUTimeMs is the CPU time used since the sandbox started; CPUPercent is the use since the
	// previous sample (100 = one full vCPU).
	CPUTimeMs       int64   `json:"cpuTimeMs"`
	CPUPercent      float64 `json:"cpuPercent"`
	MemoryBytes     int64   `json:"memoryBytes"`
	MemoryPeakBytes int64   `json:"memoryPeakBytes"`
	MemoryLimit     int64   `json:"memoryLimitBytes"`
	Pids            int64   `json:"pids"`
	PidsLimit       int64   `json:"pidsLimit"`
	DiskUsedBytes   int64   `json:"diskUsedBytes"`
	DiskLimitBytes  int64   `json:"diskLimitBytes"`
	NetworkTxBytes  int64   `json:"networkTxBytes"`
	NetworkRxBytes  int64   `json:"networkRxBytes"`
}

// Metrics is GET /api/v1/sandboxes/{id}/metrics: the current reading and the recent ones, oldest
// first.
type Metrics struct {
	SandboxID string          `json:"sandboxId"`
	Current   MetricsSample   `json:"current"`
	Recent    []MetricsSample `json:"recent"`
}

// Capabilities is GET /api/v1/capabilities: what this host offers, and why not.
type Capabilities struct {
	Version string            `json:"version"`
	Levels  []LevelCapability `json:"levels"`
	// DefaultIsolation is the level a create without isolation gets (the operator's
	// defaults.isolation; container unless configured).
	DefaultIsolation string `json:"defaultIsolation"`
	// Features are the API's optional capabilities and whether this daemon has them.
	Features map[string]bool `json:"features"`
	// Reasons say why a feature is false, by its name (e.g. gpu).
	Reasons map[string]string `json:"reasons,omitempty"`
}

// LevelCapability is one isolation level on this host.
type LevelCapability struct {
	Level     string   `json:"level"`
	Available bool     `json:"available"`
	Reason    string   `json:"reason,omitempty"`
	Fix       string   `json:"fix,omitempty"`
	Features  []string `json:"features,omitempty"`
	// Detail says how an available level runs here, when that depends on the host (the microvm
	// level's accelerator, and why).
	Detail string `json:"detail,omitempty"`
}

// Key is an API key as listed; the secret itself is shown once, at creation (NewKey).
type Key struct {
	ID        string     `json:"id"`
	Tenant    string     `json:"tenant"`
	Admin     bool       `json:"admin,omitempty"` // an operator's key (docs/security.md#who-is-trusted-with-what)
	CreatedAt time.Time  `json:"createdAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// Health is GET /healthz.
type Health struct {
	// Status is "ok", or "degraded" while the daemon's store cannot be written (its data
	// dir's disk is full): reads are served, writes answer 507 until it has room.
	Status string `json:"status"`
	// Reason says why the daemon is degraded, and since when.
	Reason    string `json:"reason,omitempty"`
	Version   string `json:"version"`
	Sandboxes int    `json:"sandboxes"` // live sandboxes
}

// VolumeInfo is one of the operator's volumes as GET /api/v1/volumes lists it: a tenant sees
// the names it may mount; an admin key also sees the host path and the tenants granted.
type VolumeInfo struct {
	Name     string   `json:"name"`
	ReadOnly bool     `json:"readOnly,omitempty"`
	HostPath string   `json:"hostPath,omitempty"`
	Tenants  []string `json:"tenants,omitempty"`
}

// TemplateInfo is a root filesystem template as GET /api/v1/templates lists it: "host" (the
// default) and the operator's directories the tenant may use (an admin key also sees where).
type TemplateInfo struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"` // host or directory
	Dir     string   `json:"dir,omitempty"`
	Tenants []string `json:"tenants,omitempty"`
}

// Quota is a tenant's bounds (docs/security.md#who-is-trusted-with-what); a zero field is unbounded.
type Quota struct {
	// Plan names the plan (config tenants.plans; "free" is built in: 3 sandboxes, seed 002)
	// whose quota fills the fields left at zero here.
	Plan              string  `json:"plan,omitempty"`
	MaxSandboxes      int     `json:"maxSandboxes,omitempty"`
	MaxMemoryMB       int64   `json:"maxMemoryMb,omitempty"`
	MaxDiskMB         int64   `json:"maxDiskMb,omitempty"`
	RequestsPerSecond float64 `json:"requestsPerSecond,omitempty"`
	Burst             int     `json:"burst,omitempty"`
	// MaxStoredMB bounds what the daemon keeps for the tenant: exec output (past it, the
	// oldest execs' output is dropped, their records kept) and snapshots (past it, a new
	// snapshot is refused).
	MaxStoredMB int64 `json:"maxStoredMb,omitempty"`
}

// Usage is what a tenant uses now of its quota.
type Usage struct {
	Sandboxes int   `json:"sandboxes"`
	MemoryMB  int64 `json:"memoryMb"`
	DiskMB    int64 `json:"diskMb"`
	StoredMB  int64 `json:"storedMb"`
}

// Tenant is GET /api/v1/tenants' entry: a tenant's quota and usage. A tenant key sees itself;
// an admin key every tenant that has a key.
type Tenant struct {
	Name  string `json:"name"`
	Quota Quota  `json:"quota"`
	Usage Usage  `json:"usage"`
}
