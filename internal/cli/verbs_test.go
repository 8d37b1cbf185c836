package cli

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockrun/airlock/api"
)

// create makes a sandbox through the CLI and returns its ID.
func create(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := airlockCLI(t, "", append([]string{"create"}, args...)...)
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	return strings.TrimSpace(out)
}

// TestStartVerb: create --agent, then start makes the sandbox running.
func TestStartVerb(t *testing.T) {
	fakeDaemon(t)
	id := create(t, "--agent", "python3 agent.py", "--no-wait")
	code, out, errOut := airlockCLI(t, "", "start", "--json", id)
	if code != 0 || !strings.Contains(out, `"status": "running"`) || !strings.Contains(out, `"/bin/sh"`) {
		t.Errorf("start: %d %q %q", code, out, errOut)
	}
}

func TestClientVerbs(t *testing.T) {
	fakeDaemon(t)
	id := create(t, "--name", "web", "--memory", "512M", "--agent-id", "a1", "--metadata", "team=ml")
	if !strings.HasPrefix(id, "sbx_") {
		t.Fatalf("create printed %q", id)
	}
	other := create(t, "--name", "other")

	for _, c := range []struct {
		name          string
		stdin         string
		args          []string
		code          int
		stdout, errOn string // stdout is matched exactly unless it starts with "~" (substring)
	}{
		{"ls", "", []string{"ls"}, 0, "~web", ""},
		{"ls by metadata", "", []string{"ls", "-q", "--metadata", "team=ml"}, 0, id + "\n", ""},
		{"ls by agent", "", []string{"ls", "-q", "--agent-id", "nobody"}, 0, "", ""},
		{"inspect", "", []string{"inspect", id}, 0, "~cpu 1, memory 512M", ""},
		{"exec", "", []string{"exec", id, "--", "echo", "hello", "world"}, 0, "hello world\n", ""},
		{"exec keeps stderr apart", "", []string{"exec", id, "warn", "careful"}, 0, "", "careful\n"},
		{"exec exits with the status", "", []string{"exec", id, "--", "sh", "-c", "exit 3"}, 3, "", ""},
		{"exec streams piped stdin", "piped\n", []string{"exec", id, "--", "cat"}, 0, "piped\n", ""},
		{"exec timeout exits 124", "", []string{"exec", "--timeout", "100ms", id, "--", "sleep", "10"}, 124, "", ""},
		{"exec --json", "", []string{"exec", "--json", id, "--", "echo", "hi"}, 0, "~\"stdout\": \"hi\\n\"", ""},
		{"exec --json -i sends stdin", "in", []string{"exec", "--json", "-i", id, "--", "cat"}, 0, "~\"stdout\": \"in\"", ""},
		{"exec --json without -i sends none", "in", []string{"exec", "--json", id, "--", "cat"}, 0, "~\"stdout\": \"\"", ""},
		{"exec in an unknown sandbox", "", []string{"exec", "sbx_nope", "true"}, 1, "", "airlock: sandbox \"sbx_nope\" not found\n"},
		{"logs", "", []string{"logs", id}, 0, "~hello world\n", "* "},
		{"pause", "", []string{"pause", id}, 0, id + "\n", ""},
		{"pause twice is a conflict", "", []string{"pause", id}, 1, "", "airlock: only a ready or running sandbox can be paused\n"},
		{"exec in a paused sandbox", "", []string{"exec", id, "true"}, 1, "", "is paused"},
		{"resume", "", []string{"resume", id}, 0, id + "\n", ""},
		{"start without an agent names it", "", []string{"start", id}, 1, "", "agent: the sandbox has no agent to start"},
		{"rm goes on after a failure", "", []string{"rm", "sbx_nope", other}, 1, other + "\n", "airlock: sandbox \"sbx_nope\" not found\n"},
		{"ls hides terminated", "", []string{"ls", "-q"}, 0, id + "\n", ""},
		{"ls -a shows them", "", []string{"ls", "-q", "-a"}, 0, id + "\n" + other + "\n", ""},
		{"ls --status", "", []string{"ls", "-q", "--status", "terminated"}, 0, other + "\n", ""},
		{"rm --json", "", []string{"rm", "--json", id}, 0, "~\"status\": \"terminated\"", ""},
		{"logs -f ends with the sandbox", "", []string{"logs", "-f", id}, 0, "~hello world\n", "status terminated (requested)"},
		{"usage: no ID", "", []string{"inspect"}, 2, "", "want one sandbox ID"},
		{"usage: unknown flag", "", []string{"ls", "--bogus"}, 2, "", "flag provided but not defined: --bogus"},
		{"help", "", []string{"rm", "--help"}, 0, "", "usage: airlock rm"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := airlockCLI(t, c.stdin, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr %q", code, c.code, errOut)
			}
			if want, ok := strings.CutPrefix(c.stdout, "~"); ok {
				if !strings.Contains(out, want) {
					t.Errorf("stdout %q lacks %q", out, want)
				}
			} else if out != c.stdout {
				t.Errorf("stdout %q, want %q", out, c.stdout)
			}
			if !strings.Contains(errOut, c.errOn) {
				t.Errorf("stderr %q lacks %q", errOut, c.errOn)
			}
		})
	}
}

func TestCreateErrorsNameTheFlag(t *testing.T) {
	fakeDaemon(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--memory", "64G"}, "airlock: --memory: must be between 16 and 32768 MiB\n"},
		{[]string{"--isolation", "microvm"}, "airlock: --isolation: isolation \"microvm\" is not available on this host\n"},
	} {
		code, _, errOut := airlockCLI(t, "", append([]string{"create"}, c.args...)...)
		if code != 1 || errOut != c.want {
			t.Errorf("create %q: exit %d, stderr %q; want 1, %q", c.args, code, errOut, c.want)
		}
	}
}

func TestCreateJSON(t *testing.T) {
	fakeDaemon(t)
	code, out, _ := airlockCLI(t, "", "create", "--json", "--cpu", "2")
	var sb api.Sandbox
	if err := json.Unmarshal([]byte(out), &sb); code != 0 || err != nil || sb.Resources.CPU != 2 || sb.Status != api.StatusReady {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
}

func TestDaemonUnreachable(t *testing.T) {
	srv := httptest.NewServer(nil)
	host := srv.Listener.Addr().String()
	srv.Close()
	t.Setenv("AIRLOCK_HOST", host)
	for _, args := range [][]string{{"ls"}, {"exec", "sbx_1", "true"}, {"rm", "sbx_1", "sbx_2"}} {
		code, _, errOut := airlockCLI(t, "", args...)
		if code != 125 || !strings.Contains(errOut, "cannot reach the daemon at http://"+host) || !strings.Contains(errOut, "airlock serve") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		if strings.Count(errOut, "cannot reach") != 1 {
			t.Errorf("%q: said it more than once: %q", args, errOut)
		}
	}
}

func TestBadToken(t *testing.T) {
	fakeDaemon(t)
	t.Setenv("AIRLOCK_TOKEN", "wrong")
	code, _, errOut := airlockCLI(t, "", "ls")
	if code != 1 || !strings.Contains(errOut, "AIRLOCK_TOKEN") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestCp(t *testing.T) {
	fakeDaemon(t)
	id := create(t)
	dir := t.TempDir()
	local := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(local, []byte("#!/bin/sh\necho hi\n"), 0o750); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		stdin string
		args  []string
		code  int
	}{
		{"", []string{"cp", local, id + ":/workspace/"}, 0},                  // into a directory by its name
		{"", []string{"cp", local, id + ":/workspace/bin/copy.sh"}, 0},       // to a new name, parents made
		{"from stdin", []string{"cp", "-", id + ":/workspace/in.txt"}, 0},    // stdin
		{"", []string{"cp", id + ":/workspace/run.sh", dir + "/back.sh"}, 0}, // out to a name
		{"", []string{"cp", id + ":/workspace/in.txt", dir}, 0},              // out into a directory
		{"", []string{"cp", local, filepath.Join(dir, "x")}, 2},              // both local
		{"", []string{"cp", id + ":", dir}, 2},                               // no path inside
		{"", []string{"cp", id + ":in.txt", dir + "/rel.txt"}, 0},            // relative to the workdir
		{"", []string{"cp", id + ":/workspace", dir}, 1},                     // a directory
		{"", []string{"cp", id + ":/nope", dir}, 1},                          // missing
		{"", []string{"cp", "-", id + ":/workspace/"}, 1},                    // stdin needs a name
	}
	for _, s := range steps {
		if code, _, errOut := airlockCLI(t, s.stdin, s.args...); code != s.code {
			t.Errorf("%q: exit %d, want %d: %s", s.args, code, s.code, errOut)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "back.sh")); string(b) != "#!/bin/sh\necho hi\n" {
		t.Errorf("downloaded %q", b)
	}
	if fi, err := os.Stat(filepath.Join(dir, "back.sh")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("downloaded mode %v, %v; want the uploaded 0750", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "rel.txt")); string(b) != "from stdin" {
		t.Errorf("downloaded %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "in.txt")); string(b) != "from stdin" {
		t.Errorf("downloaded %q", b)
	}
	code, out, _ := airlockCLI(t, "", "exec", id, "--", "cat", "/workspace/bin/copy.sh")
	if code != 0 || out != "#!/bin/sh\necho hi\n" {
		t.Errorf("copy in the sandbox: exit %d, %q", code, out)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*airlock*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %q", leftovers)
	}
}
