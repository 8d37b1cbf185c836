package wasm

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

func TestParseCommand(t *testing.T) {
	for _, c := range []struct {
		name string
		argv []string
		lang string
		args []string
		env  map[string]string
		exit int // of the refusal; 0: accepted
	}{
		{"python3", []string{"python3", "-c", "print(1)"}, langPython, []string{"-c", "print(1)"}, nil, 0},
		{"path", []string{"/usr/local/bin/python3.11", "f.py"}, langPython, []string{"f.py"}, nil, 0},
		{"node", []string{"node", "-e", "1"}, langJS, []string{"-e", "1"}, nil, 0},
		{"sh -c", []string{"/bin/sh", "-c", `python3 -c 'print("a b")'`}, langPython, []string{"-c", `print("a b")`}, nil, 0},
		{"sh -c escapes", []string{"sh", "-c", `node -e "console.log(\"x\")" a\ b`}, langJS, []string{"-e", `console.log("x")`, "a b"}, nil, 0},
		{"assignments", []string{"bash", "-c", "A=1 B_2=x python3 f.py"}, langPython, []string{"f.py"}, map[string]string{"A": "1", "B_2": "x"}, 0},
		{"env", []string{"/usr/bin/env", "A=1", "node", "f.js"}, langJS, []string{"f.js"}, map[string]string{"A": "1"}, 0},
		{"unknown", []string{"ls"}, "", nil, nil, 127},
		{"empty", []string{""}, "", nil, nil, 127},
		{"sh without -c", []string{"sh", "script.sh"}, "", nil, nil, 127},
		{"pipe", []string{"sh", "-c", "python3 f.py | cat"}, "", nil, nil, 2},
		{"substitution", []string{"sh", "-c", `python3 -c "$(cat f)"`}, "", nil, nil, 2},
		{"variable", []string{"sh", "-c", "python3 $F"}, "", nil, nil, 2},
		{"unterminated", []string{"sh", "-c", "python3 'x"}, "", nil, nil, 2},
		{"sh -c unknown", []string{"sh", "-c", "ls -l"}, "", nil, nil, 127},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd, err := parseCommand(c.argv)
			if c.exit != 0 {
				ce, ok := errors.AsType[*commandError](err)
				if !ok || ce.exit != c.exit {
					t.Fatalf("err %v, want a refusal with exit %d", err, c.exit)
				}
				return
			}
			if err != nil || cmd.lang != c.lang || !reflect.DeepEqual(cmd.args, c.args) {
				t.Fatalf("got %+v %v, want %s %q", cmd, err, c.lang, c.args)
			}
			if c.env == nil {
				c.env = map[string]string{}
			}
			if !reflect.DeepEqual(cmd.env, c.env) {
				t.Fatalf("env %v, want %v", cmd.env, c.env)
			}
		})
	}
}

// TestConfinedFS: paths cannot leave the directory, links are neither made nor followed, writes
// outside the writable paths are EROFS, blocked paths EACCES, and open files are capped.
func TestConfinedFS(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600))
	for _, d := range []string{"workspace", "etc", "workspace/blocked"} {
		must(os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	must(os.WriteFile(filepath.Join(dir, "etc", "conf"), []byte("c"), 0o644))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "workspace", "link")))
	must(os.Symlink(outside, filepath.Join(dir, "workspace", "dirlink")))
	files := &openFiles{limit: 2}
	c := newConfinedFS(dir, "/", []string{"/workspace"}, []string{"/workspace/blocked"}, files)

	open := func(p string, flag experimentalsys.Oflag) experimentalsys.Errno {
		f, errno := c.OpenFile(p, flag, 0o644)
		if errno == 0 {
			f.Close()
		}
		return errno
	}
	for _, tc := range []struct {
		name string
		got  experimentalsys.Errno
		want experimentalsys.Errno
	}{
		{"read inside", open("etc/conf", experimentalsys.O_RDONLY), 0},
		{"dotdot stays inside", open("../../etc/conf", experimentalsys.O_RDONLY), 0},
		{"dotdot cannot reach outside", open("../../"+outside+"/secret", experimentalsys.O_RDONLY), experimentalsys.ENOENT},
		{"planted link not followed", open("workspace/link", experimentalsys.O_RDONLY), experimentalsys.ELOOP},
		{"planted dir link not traversed", open("workspace/dirlink/secret", experimentalsys.O_RDONLY), experimentalsys.ELOOP},
		{"stat through dir link", func() experimentalsys.Errno { _, e := c.Stat("workspace/dirlink/secret"); return e }(), experimentalsys.ELOOP},
		{"write in workspace", open("workspace/new", experimentalsys.O_WRONLY|experimentalsys.O_CREAT), 0},
		{"write outside writable", open("etc/new", experimentalsys.O_WRONLY|experimentalsys.O_CREAT), experimentalsys.EROFS},
		{"mkdir outside writable", c.Mkdir("newdir", 0o755), experimentalsys.EROFS},
		{"symlink refused", c.Symlink("/etc/passwd", "workspace/l2"), experimentalsys.EPERM},
		{"blocked", open("workspace/blocked/x", experimentalsys.O_RDONLY), experimentalsys.EACCES},
		{"rename out of writable", c.Rename("workspace/new", "etc/moved"), experimentalsys.EROFS},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: errno %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	a, _ := c.OpenFile("etc/conf", experimentalsys.O_RDONLY, 0)
	b, _ := c.OpenFile("etc/conf", experimentalsys.O_RDONLY, 0)
	if _, errno := c.OpenFile("etc/conf", experimentalsys.O_RDONLY, 0); errno != experimentalsys.EAGAIN {
		t.Errorf("third open file past a limit of 2: errno %v", errno)
	}
	a.Close()
	a.Close() // twice: one slot back, not two
	if f, errno := c.OpenFile("etc/conf", experimentalsys.O_RDONLY, 0); errno != 0 {
		t.Errorf("open after a close: %v", errno)
	} else {
		f.Close()
	}
	b.Close()
	if n := files.n.Load(); n != 0 {
		t.Errorf("%d files counted open after closing all", n)
	}
}

func TestPythonArgs(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"s.py", "a"}, []string{"/w/s.py", "a"}},
		{[]string{"/abs/s.py"}, []string{"/abs/s.py"}},
		{[]string{"-u", "-W", "ignore", "d/s.py"}, []string{"-u", "-W", "ignore", "/w/d/s.py"}},
		{[]string{"-c", "print(1)", "x.py"}, []string{"-c", "print(1)", "x.py"}},
		{[]string{"-Ic", "print(1)"}, []string{"-Ic", "print(1)"}},
		{[]string{"-m", "json.tool", "f"}, []string{"-m", "json.tool", "f"}},
		{[]string{"-"}, []string{"-"}},
		{[]string{"--", "s.py"}, []string{"--", "/w/s.py"}},
		{nil, nil},
	} {
		if got := pythonArgs(c.in, "/w"); !reflect.DeepEqual(got, c.want) {
			t.Errorf("pythonArgs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
