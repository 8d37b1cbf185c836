package tools

import (
	"fmt"
	"path"
	"strings"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/internal/errdefs"
)

// Caller is who makes a call: the tenant and API key of the request, the agent it says it acts
// for, and the sandbox the call runs in (when it names one). Policies bind callers.
type Caller struct {
	Tenant    string
	KeyID     string
	Admin     bool
	AgentID   string
	SandboxID string
	Remote    string
}

// key names the caller for rate limits and sandboxes kept per caller: its API key and agent.
func (c Caller) key() string { return c.KeyID + "\x00" + c.AgentID }

// Bounds of a policy.
const (
	maxPatterns   = 64
	maxPatternLen = 128
	maxRateLimits = 32
)

// policy is a checked api.ToolPolicy with its rates parsed.
type policy struct {
	api.ToolPolicy
	rates []Rate
}

// compilePolicy checks p. Tenant "*" (every tenant) is the configuration's alone (config says
// so; here it is a name).
func compilePolicy(p api.ToolPolicy) (*policy, error) {
	if !api.ValidName(p.Name) {
		return nil, errdefs.Invalid("name", "a policy's name is 1-64 letters, digits, '.', '_' or '-' (got %q)", p.Name)
	}
	if p.Tenant != "*" && p.Tenant != "" && !api.ValidName(p.Tenant) {
		return nil, errdefs.Invalid("tenant", "%q is not a tenant name", p.Tenant)
	}
	for _, f := range []struct {
		name string
		list []string
	}{{"allow", p.Allow}, {"deny", p.Deny}} {
		if len(f.list) > maxPatterns {
			return nil, errdefs.Invalid(f.name, "at most %d patterns (got %d)", maxPatterns, len(f.list))
		}
		for i, pat := range f.list {
			if err := checkPattern(pat); err != nil {
				return nil, errdefs.Invalid(fmt.Sprintf("%s[%d]", f.name, i), "%v", err)
			}
		}
	}
	if p.ToolsOnly && (p.AgentID != "" || p.SandboxID != "") {
		return nil, errdefs.Invalid("toolsOnly", "binds a key's every request: a policy scoped to an agent or a sandbox cannot set it")
	}
	if len(p.RateLimits) > maxRateLimits {
		return nil, errdefs.Invalid("rateLimits", "at most %d (got %d)", maxRateLimits, len(p.RateLimits))
	}
	c := &policy{ToolPolicy: p}
	for i, rl := range p.RateLimits {
		if err := checkPattern(rl.Tools); err != nil {
			return nil, errdefs.Invalid(fmt.Sprintf("rateLimits[%d].tools", i), "%v", err)
		}
		r, err := ParseRate(rl.Limit)
		if err != nil {
			return nil, errdefs.Invalid(fmt.Sprintf("rateLimits[%d].limit", i), "%v", err)
		}
		c.rates = append(c.rates, r)
	}
	return c, nil
}

func checkPattern(p string) error {
	if p == "" || len(p) > maxPatternLen {
		return fmt.Errorf("a pattern is 1-%d characters", maxPatternLen)
	}
	for _, c := range []byte(p) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*') {
			return fmt.Errorf("%q: a pattern holds letters, digits, '_', '-' and '*' (any run of characters)", p)
		}
	}
	return nil
}

// match reports whether tool name matches pattern ("*" is any run of characters).
func match(pattern, name string) bool {
	ok, err := path.Match(pattern, name) // names and patterns hold no '/', '?', '[' or '\'
	return err == nil && ok
}

func matchAny(patterns []string, name string) (string, bool) {
	for _, p := range patterns {
		if match(p, name) {
			return p, true
		}
	}
	return "", false
}

// applies reports whether p binds c: its tenant ("*": every tenant), and each of key, agent and
// sandbox that it names.
func (p *policy) applies(c Caller) bool {
	return (p.Tenant == "*" || p.Tenant == c.Tenant) &&
		(p.KeyID == "" || p.KeyID == c.KeyID) &&
		(p.AgentID == "" || p.AgentID == c.AgentID) &&
		(p.SandboxID == "" || p.SandboxID == c.SandboxID)
}

// unconditional reports whether p binds every call of its key(s): it names no agent or sandbox.
func (p *policy) unconditional() bool { return p.AgentID == "" && p.SandboxID == "" }

// decide says whether the policies that apply to c allow tool, and the rule that decided: a deny
// pattern of one of them, one whose allow list the name is not on, or the allow patterns that let
// it through ("no policy" when none applies).
func decide(ps []*policy, c Caller, tool string) (bool, string) {
	var allowed []string
	for _, p := range ps {
		if !p.applies(c) {
			continue
		}
		if pat, ok := matchAny(p.Deny, tool); ok {
			return false, fmt.Sprintf("policy %s: deny %s", p.Name, pat)
		}
		if len(p.Allow) > 0 {
			pat, ok := matchAny(p.Allow, tool)
			if !ok {
				return false, fmt.Sprintf("policy %s: not in allow [%s]", p.Name, strings.Join(p.Allow, " "))
			}
			allowed = append(allowed, fmt.Sprintf("policy %s: allow %s", p.Name, pat))
		}
	}
	if len(allowed) == 0 {
		return true, "no allow list applies"
	}
	return true, strings.Join(allowed, "; ")
}

// limits are the rate limits of the policies that apply to c for tool: each rule's bucket is per
// policy, rule and caller (and per tool with Each).
func limits(ps []*policy, c Caller, tool string) []limit {
	var out []limit
	for _, p := range ps {
		if !p.applies(c) {
			continue
		}
		for i, rl := range p.RateLimits {
			if !match(rl.Tools, tool) {
				continue
			}
			key := fmt.Sprintf("p\x00%s\x00%s\x00%d\x00%s", p.Tenant, p.Name, i, c.key())
			if rl.Each {
				key += "\x00" + tool
			}
			out = append(out, limit{key: key, rate: p.rates[i], rule: fmt.Sprintf("policy %s: rateLimits[%d] %s %s", p.Name, i, rl.Tools, rl.Limit)})
		}
	}
	return out
}
