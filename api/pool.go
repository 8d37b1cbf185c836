package api

// Pool is a warm pool: sandboxes of one shape, created ahead of time, each claimed by a create
// that matches the shape — the body of PUT /api/v1/pools/{name}. A claimed sandbox is never
// returned to the pool.
type Pool struct {
	Name string `json:"name"`
	// Spec is the shape. A create matches the pool when its isolation, runtime, template, image,
	// rootfs, user, workdir, resources and filesystem equal the pool's after defaults, and it is
	// networked exactly when the pool is (egressPolicy none or not). The claiming create's name,
	// agentId, environment, metadata, timeout and network policy (allowlist, credentials) are
	// attached at claim time, before its first command runs. A networked pool's sandboxes wait
	// with the pool's own policy; give it restricted with no allowed domains: nothing is reachable.
	Spec Spec `json:"spec"`
	// Size is how many ready sandboxes the pool keeps (1 to 256).
	Size int `json:"size" openapi:"required"`
	// RefillPerSecond caps how many sandboxes the pool starts per second to refill (default 10).
	RefillPerSecond float64 `json:"refillPerSecond,omitempty"`
	// MaxAgeSeconds is how long an unclaimed sandbox waits before it is recycled: ended and
	// replaced by a new one (default 3600).
	MaxAgeSeconds int64 `json:"maxAgeSeconds,omitempty"`
}

// PoolStatus is a pool with its counters, as GET /api/v1/pools shows it.
type PoolStatus struct {
	Pool
	// Source is "config" for a pool of the daemon's configuration file (changed only there) and
	// "api" for one made through the API.
	Source  string `json:"source" enum:"config,api"`
	Ready   int    `json:"ready"`   // sandboxes waiting to be claimed
	Warming int    `json:"warming"` // sandboxes being created
	// Claims counts creates that got a ready sandbox; Misses those that matched the pool but
	// found it empty and were created cold. HitRate is Claims / (Claims + Misses), 0 without any.
	Claims   int64   `json:"claims"`
	Misses   int64   `json:"misses"`
	HitRate  float64 `json:"hitRate"`
	Recycled int64   `json:"recycled"` // aged out, or ended by themselves while waiting
	Failures int64   `json:"failures"` // creates of pool sandboxes that failed
	// LastError is the latest failure to create one of the pool's sandboxes.
	LastError string `json:"lastError,omitempty"`
}
