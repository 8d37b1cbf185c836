// Package tenancy is what the operator grants tenants (docs/security.md#who-is-trusted-with-what): named volumes and templates
// (the only way a host path enters a sandbox through the API), secrets scoped to hosts and
// tenants, approved images, and each tenant's quotas. It is data and checks, no mechanism: the
// manager asks it before anything is created, and it fills in the host paths a granted spec
// stands for.
package tenancy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
	"github.com/airlockrun/airlock/internal/sandbox"
)

// Everyone in a Tenants list grants every tenant.
const Everyone = "*"

// Volume is a host directory the operator lends to tenants.
type Volume struct {
	HostPath string
	ReadOnly bool     // every mount of it is read-only
	Tenants  []string // who may mount it; Everyone for all
}

// Template is a host directory used as a sandbox's root filesystem (copy-on-write).
type Template struct {
	Dir     string
	Tenants []string
}

// Agent is an agent the operator defines once for tenants to name by ID: a create with
// agentId: NAME (and no agent of its own) gets its command, environment and working directory,
// so that seed 000's create({agentId}) then start() runs it.
type Agent struct {
	Agent   api.Agent
	Tenants []string
}

// Secret scopes one of the operator's secrets: the hosts it may be sent to (exact names or
// "*.example.com", any name below it) and the tenants that may bind it. Its value lives with the
// egress proxy, never here.
type Secret struct {
	Hosts   []string
	Tenants []string
}

// Images is the operator's approval of images: tenants may use images already in the store (the
// operator pulled them) and those matching Allowed, pulled only from Registries.
type Images struct {
	// Allowed are reference patterns a tenant's image may match, "*" standing for any run of
	// characters: "docker.io/library/python:*", "ghcr.io/acme/*". Matched against the
	// reference as given and as canonical ("index.docker.io/library/python:3.12", also spelled
	// docker.io/library/python:3.12).
	Allowed []string
	// Registries are the registry hosts pulls may reach ("ghcr.io", "index.docker.io"); none
	// means any registry an allowed reference names.
	Registries []string
}

// Quota bounds one tenant's use of the daemon (docs/security.md#who-is-trusted-with-what): live sandboxes (pool claims and forks
// included), their total memoryMb and diskMb, the API request rate (a token bucket of Burst). A
// zero field is unbounded.
type Quota = api.Quota

// Grants is everything the operator configured for tenants. The zero value grants nothing and
// bounds nothing.
type Grants struct {
	Volumes   map[string]Volume
	Templates map[string]Template
	Secrets   map[string]Secret
	Agents    map[string]Agent
	Images    Images
	// Quota is every tenant's, unless Quotas has one of its name.
	Quota  Quota
	Quotas map[string]Quota
}

// QuotaOf returns tenant's quota.
func (g *Grants) QuotaOf(tenant string) Quota {
	if q, ok := g.Quotas[tenant]; ok {
		return q
	}
	return g.Quota
}

func granted(tenants []string, tenant string) bool {
	return slices.Contains(tenants, Everyone) || slices.Contains(tenants, tenant)
}

// Check refuses what spec uses and tenant was not granted: a volume, a template, a secret bound
// to a credential (or bound to a host the secret may not go to). Errors are 403s naming the
// field, and never tell whether a name exists that the tenant may not use.
func (g *Grants) Check(tenant string, spec sandbox.Spec) error {
	if t := spec.Template; t != "" && t != sandbox.TemplateHost {
		if tp, ok := g.Templates[t]; !ok || !granted(tp.Tenants, tenant) {
			return errdefs.Denied("template", api.CodeTemplateNotGranted, "template %q is not granted to tenant %s (GET /api/v1/templates lists those it may use)", t, tenant)
		}
	}
	for i, vm := range spec.Volumes {
		if v, ok := g.Volumes[vm.Name]; !ok || !granted(v.Tenants, tenant) {
			return errdefs.Denied(fmt.Sprintf("volumes[%d].name", i), api.CodeVolumeNotGranted,
				"volume %q is not granted to tenant %s (GET /api/v1/volumes lists those it may use)", vm.Name, tenant)
		}
	}
	return g.CheckCredentials(tenant, spec.Network.Credentials)
}

// CheckCredentials refuses a credential that names a secret tenant may not use, or binds it to
// a host the secret may not be sent to.
func (g *Grants) CheckCredentials(tenant string, creds []sandbox.Credential) error {
	for i, c := range creds {
		if c.Secret == "" {
			continue // the tenant's own value
		}
		field := fmt.Sprintf("network.credentials[%d].secret", i)
		s, ok := g.Secrets[c.Secret]
		if !ok || !granted(s.Tenants, tenant) {
			return errdefs.Denied(field, api.CodeSecretNotGranted, "secret %q is not granted to tenant %s", c.Secret, tenant)
		}
		if !hostAllowed(s.Hosts, c.Host) {
			return errdefs.Denied(field, api.CodeSecretNotGranted, "secret %q may not be sent to %s (the operator allows %s)", c.Secret, c.Host, strings.Join(s.Hosts, ", "))
		}
	}
	return nil
}

// hostAllowed reports whether host matches one of the patterns: an exact name, or "*.x.com"
// for any name strictly below x.com.
func hostAllowed(patterns []string, host string) bool {
	host = canonicalHost(host)
	for _, p := range patterns {
		p = canonicalHost(p)
		if suffix, ok := strings.CutPrefix(p, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == p {
			return true
		}
	}
	return false
}

func canonicalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// AgentFor returns the operator's agent called id if tenant may use it (admin: any). An agentId
// that names none, or one not granted, is only a label: the caller gets false, and cannot tell
// which.
func (g *Grants) AgentFor(tenant string, admin bool, id string) (api.Agent, bool) {
	a, ok := g.Agents[id]
	if !ok || !admin && !granted(a.Tenants, tenant) {
		return api.Agent{}, false
	}
	ag := a.Agent
	ag.Command = slices.Clone(ag.Command)
	ag.Env = maps.Clone(ag.Env)
	return ag, true
}

// Resolve fills in the host paths spec stands for: its volumes' directories as Binds, its
// template's directory as RootDir. It does not check grants (Check does, for a tenant's
// request); a name the configuration no longer has is an error naming the field.
func (g *Grants) Resolve(spec *sandbox.Spec) error {
	spec.Binds, spec.RootDir = nil, ""
	if t := spec.Template; t != "" && t != sandbox.TemplateHost {
		tp, ok := g.Templates[t]
		if !ok {
			return errdefs.Unavailable("template", "template %q is not in the daemon's configuration", t)
		}
		spec.RootDir = tp.Dir
	}
	for i, vm := range spec.Volumes {
		v, ok := g.Volumes[vm.Name]
		if !ok {
			return errdefs.Unavailable(fmt.Sprintf("volumes[%d].name", i), "volume %q is not in the daemon's configuration", vm.Name)
		}
		spec.Binds = append(spec.Binds, sandbox.Bind{Host: v.HostPath, Path: vm.Path, ReadOnly: v.ReadOnly || vm.ReadOnly})
	}
	return nil
}

// ImageAllowed reports whether a tenant may use (and have the daemon pull) image ref beyond
// those already in the store.
func (g *Images) ImageAllowed(ref string) bool {
	forms := []string{ref}
	if r, err := name.ParseReference(ref); err == nil {
		// Docker Hub's references are written docker.io/... as often as index.docker.io/...
		forms = append(forms, r.Name(), strings.Replace(r.Name(), name.DefaultRegistry+"/", "docker.io/", 1))
	}
	for _, p := range g.Allowed {
		for _, f := range forms {
			if glob(p, f) {
				return true
			}
		}
	}
	return false
}

// RegistryAllowed reports whether a pull may reach registry host reg.
func (g *Images) RegistryAllowed(reg string) bool {
	if len(g.Registries) == 0 {
		return true
	}
	alias := map[string]string{"docker.io": name.DefaultRegistry, name.DefaultRegistry: "docker.io"}
	for _, r := range g.Registries {
		if strings.EqualFold(r, reg) || strings.EqualFold(alias[strings.ToLower(r)], reg) {
			return true
		}
	}
	return false
}

// glob matches s against pattern, where '*' stands for any run of characters (slashes too).
func glob(pattern, s string) bool {
	head, rest, star := strings.Cut(pattern, "*")
	if !star {
		return pattern == s
	}
	if !strings.HasPrefix(s, head) {
		return false
	}
	s = s[len(head):]
	for i := 0; i <= len(s); i++ {
		if glob(rest, s[i:]) {
			return true
		}
	}
	return false
}

// VolumesFor lists the volumes tenant may mount, by name; admin lists all of them.
func (g *Grants) VolumesFor(tenant string, admin bool) []api.VolumeInfo {
	out := []api.VolumeInfo{}
	for n, v := range g.Volumes {
		if admin || granted(v.Tenants, tenant) {
			vi := api.VolumeInfo{Name: n, ReadOnly: v.ReadOnly}
			if admin {
				vi.HostPath, vi.Tenants = v.HostPath, v.Tenants
			}
			out = append(out, vi)
		}
	}
	slices.SortFunc(out, func(a, b api.VolumeInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// TemplatesFor lists the templates tenant may use ("host" first); admin lists all of them.
func (g *Grants) TemplatesFor(tenant string, admin bool) []api.TemplateInfo {
	var out []api.TemplateInfo
	for n, t := range g.Templates {
		if admin || granted(t.Tenants, tenant) {
			ti := api.TemplateInfo{Name: n, Kind: "directory"}
			if admin {
				ti.Dir, ti.Tenants = t.Dir, t.Tenants
			}
			out = append(out, ti)
		}
	}
	slices.SortFunc(out, func(a, b api.TemplateInfo) int { return strings.Compare(a.Name, b.Name) })
	return append([]api.TemplateInfo{{Name: sandbox.TemplateHost, Kind: "host"}}, out...)
}
