package manager

import (
	"context"
	"fmt"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
	"github.com/airlockrun/airlock/internal/tenancy"
	"github.com/airlockrun/airlock/internal/tenant"
)

// What a tenant may use and how much (docs/security.md#who-is-trusted-with-what): the operator's grants checked at create, and
// the quotas of live sandboxes.

// admit refuses a tenant's spec that uses what the operator did not grant it: a volume, a
// template, a secret, an image neither in the store nor approved. Admin keys are the operator's.
func (m *Manager) admit(ctx context.Context, spec sandbox.Spec) error {
	if tenant.IsAdmin(ctx) {
		return nil
	}
	ten := tenant.From(ctx)
	if err := m.cfg.Grants.Check(ten, spec); err != nil {
		return err
	}
	if spec.Image != "" && !m.cfg.ImageInStore(spec.Image) && !m.cfg.Grants.Images.ImageAllowed(spec.Image) {
		return errdefs.Denied("image", api.CodeImageNotAllowed, "image %q is not approved: tenants use the images the operator pulled (GET /api/v1/images) or allowed (images.allowed)", spec.Image)
	}
	return nil
}

// reserve makes new sandbox b of tenant ten live, within the tenant's quota. The quota is checked
// and the place taken under one lock, so that concurrent creates cannot overshoot it.
func (m *Manager) reserve(ten string, spec sandbox.Spec, b *box) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.quotaLocked(ten, spec); err != nil {
		return err
	}
	if _, ok := m.boxes[b.id]; ok { // an ID the caller chose (spec.ID)
		return errdefs.New(errdefs.ErrConflict, "sandbox %s exists already", b.id)
	}
	m.boxes[b.id] = b
	return nil
}

// reserveClaim holds a place in tenant ten's quota for a claim of a sandbox of spec from a warm
// pool, as reserve does for a new one; endClaim gives it up, and makes claimed b live.
func (m *Manager) reserveClaim(ten string, spec sandbox.Spec) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.quotaLocked(ten, spec); err != nil {
		return err
	}
	m.claiming[ten]++
	return nil
}

// endClaim ends a claim reserveClaim held a place for: b is live if it was claimed.
func (m *Manager) endClaim(ten string, b *box, claimed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claiming[ten]--; m.claiming[ten] == 0 {
		delete(m.claiming, ten)
	}
	if claimed {
		m.boxes[b.id] = b
	}
}

// quotaLocked refuses a new sandbox of spec for tenant ten past its quota: live sandboxes
// (claims in flight included), their total memory and disk. m.mu is held.
func (m *Manager) quotaLocked(ten string, spec sandbox.Spec) error {
	q := m.quotaOf(ten)
	u := m.usageLocked(ten)
	switch {
	case u.Sandboxes >= q.MaxSandboxes && q.Plan != "":
		return quotaError("maxSandboxes", "tenant %q has %d live sandboxes, the most its plan %q allows at once", ten, u.Sandboxes, q.Plan)
	case u.Sandboxes >= q.MaxSandboxes:
		return quotaError("maxSandboxes", "tenant %q has %d live sandboxes, the most it may have", ten, u.Sandboxes)
	case q.MaxMemoryMB > 0 && u.MemoryMB+spec.Resources.MemoryMB > q.MaxMemoryMB:
		return quotaError("maxMemoryMb", "tenant %q's live sandboxes have %d MiB of memory; %d more would pass its quota of %d MiB", ten, u.MemoryMB, spec.Resources.MemoryMB, q.MaxMemoryMB)
	case q.MaxDiskMB > 0 && u.DiskMB+spec.Resources.DiskMB > q.MaxDiskMB:
		return quotaError("maxDiskMb", "tenant %q's live sandboxes have %d MiB of disk; %d more would pass its quota of %d MiB", ten, u.DiskMB, spec.Resources.DiskMB, q.MaxDiskMB)
	}
	return nil
}

// quotaError is a 429 naming the quota (as the error's field, "quota.NAME").
func quotaError(quota, format string, args ...any) error {
	return &errdefs.FieldError{Field: "quota." + quota, Message: fmt.Sprintf(format, args...), Kind: errdefs.ErrQuota}
}

// usageLocked is what tenant ten's live sandboxes use, claims in flight counted as sandboxes.
// m.mu is held.
func (m *Manager) usageLocked(ten string) api.Usage {
	u := api.Usage{Sandboxes: m.claiming[ten]}
	for _, o := range m.boxes {
		if o.tenant == ten {
			u.Sandboxes++
			u.MemoryMB += o.res.MemoryMB
			u.DiskMB += o.res.DiskMB
		}
	}
	return u
}

// Tenants returns the quota and usage of the tenant in ctx, or of every tenant named for an
// admin key.
func (m *Manager) Tenants(ctx context.Context, names []string) []api.Tenant {
	if !tenant.IsAdmin(ctx) {
		names = []string{tenant.From(ctx)}
	}
	out := make([]api.Tenant, 0, len(names))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range names {
		u := m.usageLocked(n)
		u.StoredMB = m.storedOf(n) >> 20
		out = append(out, api.Tenant{Name: n, Quota: m.quotaOf(n), Usage: u})
	}
	return out
}

// quotaOf is tenant ten's quota, its live sandboxes bounded by MaxSandboxesPerTenant where the
// grants set no bound.
func (m *Manager) quotaOf(ten string) api.Quota {
	q := m.cfg.Grants.QuotaOf(ten)
	if q.MaxSandboxes == 0 {
		q.MaxSandboxes = m.cfg.MaxSandboxesPerTenant
	}
	return q
}

// Grants are the operator's grants the manager checks against.
func (m *Manager) Grants() *tenancy.Grants { return m.cfg.Grants }
