package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestKeysVerb(t *testing.T) {
	dd := t.TempDir()
	code, out, errOut := imageVerb(keysCmd, "create", "--admin", "--json", "--data-dir", dd)
	var k struct {
		Secret, ID, Tenant string
		Admin              bool
	}
	if code != 0 || json.Unmarshal([]byte(out), &k) != nil || !strings.HasPrefix(k.Secret, "alk_") || k.ID == "" || k.Tenant != adminTenant || !k.Admin {
		t.Fatalf("keys create --admin --json: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, c := range []struct {
		name    string
		args    []string
		code    int
		stderr  string // a part of it
		without string // not in it
	}{
		{"help", []string{"-h"}, 0, "usage: airlock keys create", ""},
		{"ls help lists only its flags", []string{"ls", "-h"}, 0, "-json", "-admin"},
		{"revoke help", []string{"revoke", "-h"}, 0, "-data-dir", "-tenant"},
		{"ls refuses --admin", []string{"ls", "--admin", "--data-dir", dd}, 2, "not defined: -admin", ""},
		{"unknown", []string{"frob"}, 2, `unknown subcommand "frob"`, ""},
		{"create without tenant", []string{"create", "--data-dir", dd}, 2, "usage: airlock keys create", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := imageVerb(keysCmd, c.args...)
			if code != c.code || !strings.Contains(errOut, c.stderr) || (c.without != "" && strings.Contains(errOut, c.without)) {
				t.Errorf("keys %v: exit %d, stderr %q; want exit %d with %q, without %q", c.args, code, errOut, c.code, c.stderr, c.without)
			}
		})
	}
}
