package e2e

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
	"github.com/airlockrun/airlock/client"
)

// microvmSandbox creates a microvm sandbox with network n in the world, terminated at the end of
// the test, with the test CA in /workspace/ca.pem (written by an exec: the files API does not
// reach a VM yet). It skips the test where the level is unavailable.
func (w *world) microvmSandbox(t *testing.T, n api.Network, edit ...func(*api.Spec)) string {
	t.Helper()
	spec := smallSpec()
	spec.Isolation, spec.Network = api.LevelMicroVM, n
	for _, e := range edit {
		e(&spec)
	}
	sb, err := w.c.Create(bg(), spec)
	var ce *client.Error
	if errors.As(err, &ce) && ce.Code == api.CodeIsolationUnavailable {
		t.Skipf("the microvm level is unavailable here: %s", ce.Message)
	}
	if err != nil {
		t.Fatalf("create a microvm with network %+v: %v", n, err)
	}
	w.track(t, sb.ID)
	r, err := w.c.Exec(bg(), sb.ID, api.ExecRequest{Command: api.Shell("cat > /workspace/ca.pem"), Stdin: string(w.caPEM)})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("write the CA: %+v, %v", r, err)
	}
	return sb.ID
}

// TestMicroVMNetwork: a VM's network is its sandbox's, policed by the same gateway as the other
// levels — the allowed name reached through the proxy and without it, a denied name and the
// metadata address refused and recorded, a credential added on the way out and never visible
// in the guest (nor in its VMM's memory) — and egress none leaves the guest no card at all.
func TestMicroVMNetwork(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	value := "Bearer " + randHex(t, 24)
	w.acceptAuth(value)
	n := restricted("allowed.test", "api.creds.test")
	n.Credentials = []api.Credential{{Host: "api.creds.test", Header: "Authorization", Value: value}}
	id := w.microvmSandbox(t, n, asRoot)

	t.Run("allowed", func(t *testing.T) {
		for _, c := range []struct{ args, proto, body string }{
			{"http://allowed.test/", "http", "server=allowed host=allowed.test tls=no"},
			{"--noproxy '*' --cacert /workspace/ca.pem https://allowed.test/", "tls", "server=allowed-tls host=allowed.test tls=yes"},
		} {
			r := w.sh(t, id, curl(c.args))
			if r.ExitCode != 0 || httpCode(r) != "200" || !strings.Contains(r.Stdout, c.body) {
				t.Fatalf("curl %s: want 200 and %q:\n%s", c.args, c.body, show(r))
			}
			w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: c.proto, Name: "allowed.test", Decision: "allow", Rule: "allowedDomains"})
		}
	})
	t.Run("denied", func(t *testing.T) {
		r := w.sh(t, id, curl("http://evil.test/"))
		if httpCode(r) != "403" || !strings.Contains(r.Stdout, "not_in_allowlist") {
			t.Errorf("proxy http to a denied name: want 403 naming not_in_allowlist:\n%s", show(r))
		}
		w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "http", Name: "evil.test", Decision: "deny", Rule: "not_in_allowlist"})
		r = w.sh(t, id, curl("--noproxy '*' -k --resolve evil.test:443:"+ipEvil+" https://evil.test/"))
		if r.ExitCode == 0 || strings.Contains(r.Stdout, "server=") {
			t.Errorf("transparent https to a denied name's address got through:\n%s", show(r))
		}
		w.waitEvent(t, id, r.ExecutionID, evMatch{Type: api.EventNetworkConnect, Proto: "tcp", Decision: "deny", Rule: "ip_literal"})
		w.noHits(t, srvEvil, srvEvilTLS)
	})
	t.Run("metadata", func(t *testing.T) {
		for _, args := range []string{"http://" + ipMetadata + "/latest/meta-data/", "--noproxy '*' http://" + ipMetadata + "/latest/meta-data/"} {
			if r := w.sh(t, id, curl(args)); httpCode(r) == "200" || strings.Contains(r.Stdout, "server=") {
				t.Errorf("curl %s reached the metadata address:\n%s", args, show(r))
			}
		}
		w.noHits(t, srvMetadata)
	})
	t.Run("credentials", func(t *testing.T) {
		before := len(w.hitsOf(srvAllowedTLS))
		for _, args := range []string{"http://api.creds.test/", "--noproxy '*' http://api.creds.test/"} {
			r := w.sh(t, id, curl(args))
			if r.ExitCode != 0 || !strings.Contains(r.Stdout, "server=allowed-tls host=api.creds.test tls=yes auth=yes") {
				t.Errorf("curl %s: want the HTTPS server with auth=yes:\n%s", args, show(r))
			}
		}
		for _, x := range w.hitsOf(srvAllowedTLS)[before:] {
			if !x.AuthOK {
				t.Errorf("a request arrived without the credential's value: %+v", x)
			}
		}
		w.checkSecretAbsent(t, id, value)
	})
	t.Run("none", func(t *testing.T) {
		id := w.microvmSandbox(t, api.Network{EgressPolicy: api.EgressNone})
		r := w.sh(t, id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "+curl("--noproxy '*' http://"+ipEvil+"/"))
		if got := strings.Fields(r.Stdout); len(got) < 2 || got[0] != "lo" || !strings.HasPrefix(got[1], "code=") || strings.Contains(r.Stdout, "server=") {
			t.Errorf("egress none: want only lo and no answer:\n%s", show(r))
		}
		w.noHits(t, srvEvil)
	})
}
