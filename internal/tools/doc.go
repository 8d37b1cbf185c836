// Package tools is airlock's tool gateway (docs/tools.md): tools as a resource (built-in ones,
// the operator's from the configuration, the tenant's own through the API, and those of upstream
// MCP servers run in sandboxes), each call allowed by the caller's policies, its arguments checked
// against the tool's JSON Schema, rate-limited per tool and caller, run in one of the tenant's
// sandboxes (or through a sandbox's egress proxy), and recorded as a tool.call event.
package tools
