package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConsoleFormat(t *testing.T) {
	r := testRunner(t)
	for _, tc := range []struct{ code, want string }{
		{`console.log({a:1})`, "{ a: 1 }\n"},
		{`console.log([1,2])`, "[ 1, 2 ]\n"},
		{`console.log("s", 1, true, null, undefined)`, "s 1 true null undefined\n"},
		{`console.log({s: "x", n: [1, "y"]})`, "{ s: 'x', n: [ 1, 'y' ] }\n"},
		{`console.log({a:1,b:{c:{d:{e:1}}}})`, "{ a: 1, b: { c: { d: [Object] } } }\n"},
		{`console.log(new Map([["a",{b:1}]]), new Set([1]))`, "Map(1) { 'a' => { b: 1 } } Set(1) { 1 }\n"},
		{`console.log([ , 1], Object.create(null), -0, 10n, Symbol("s"))`, "[ <1 empty item>, 1 ] [Object: null prototype] {} -0 10n Symbol(s)\n"},
		{`console.log(function foo(){}, class A{}, () => 1)`, "[Function: foo] [class A] [Function (anonymous)]\n"},
		{`console.log("%s|%d|%i|%f|%j|%o|%%", "s", 42.5, 42.5, "3.5", {a:1}, [1])`, "s|42.5|42|3.5|{\"a\":1}|[ 1, [length]: 1 ]|%\n"},
		{`const c = {name: "c"}; c.self = c; console.log(c)`, "<ref *1> { name: 'c', self: [Circular *1] }\n"},
		{`console.log({s: "it's"}, ["a\nb"])`, "{ s: \"it's\" } [ 'a\\nb' ]\n"},
		{`console.log(Buffer.from("hi"), new Uint8Array([1,2]))`, "<Buffer 68 69> Uint8Array(2) [ 1, 2 ]\n"},
		{`console.log(Array.from({length: 30}, (_, i) => i))`, "[\n   0,  1,  2,  3,  4,  5,  6,  7,  8,\n   9, 10, 11, 12, 13, 14, 15, 16, 17,\n  18, 19, 20, 21, 22, 23, 24, 25, 26,\n  27, 28, 29\n]\n"},
		{`const o = {}; for (let i = 0; i < 8; i++) o["key" + i] = "value" + i; console.log(o)`,
			"{\n  key0: 'value0',\n  key1: 'value1',\n  key2: 'value2',\n  key3: 'value3',\n  key4: 'value4',\n  key5: 'value5',\n  key6: 'value6',\n  key7: 'value7'\n}\n"},
		{`console.log(new Error("boom").stack.split("\n")[0]); console.log(String(new TypeError("t")))`, "Error: boom\nTypeError: t\n"},
		{`console.log(Object.assign(new Error("e"), {code: "E_X"}).code)`, "E_X\n"},
		{`console.log(Promise.resolve(4), new Date(0))`, "Promise { 4 } 1970-01-01T00:00:00.000Z\n"},
		{`console.info("i"); console.debug("d")`, "i\nd\n"},
		{`console.table([{a: 1, b: "x"}, {a: 22}])`, "┌─────────┬────┬─────┐\n│ (index) │ a  │ b   │\n├─────────┼────┼─────┤\n│ 0       │ 1  │ 'x' │\n│ 1       │ 22 │     │\n└─────────┴────┴─────┘\n"},
		{`process.stdout.write("no newline"); process.stdout.write(Buffer.from("!"))`, "no newline!"},
		{`console.log(require("util").inspect({a: [1, {b: 2}]}, {depth: 0}), require("util").format("%s=%d", "x", 5))`, "{ a: [Array] } x=5\n"},
		{`console.log((1234.5).toLocaleString(), new Intl.NumberFormat("en-US", {style: "currency", currency: "USD"}).format(3))`, "1,234.5 $3.00\n"},
		{`fetch("http://example.com").catch((e) => console.log(e.message, e.cause.code))`, "fetch failed ERR_UNAVAILABLE\n"},
		{`console.log(Buffer.from("hello").toString("base64"), new TextDecoder().decode(new TextEncoder().encode("hé")), require("crypto").createHash("sha256").update("abc").digest("hex").slice(0, 16))`, "aGVsbG8= hé ba7816bf8f01cfea\n"},
		{`console.log(new URL("../x?q=1", "https://a.example/b/c").href, require("path").join("/a/b", "../c"))`, "https://a.example/x?q=1 /a/c\n"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			o := run(t, r, Config{Args: []string{"-e", tc.code}})
			if o.err != nil || o.ExitCode != 0 || o.stdout != tc.want {
				t.Errorf("exit %d err %v\nstdout %q\nwant   %q\nstderr %s", o.ExitCode, o.err, o.stdout, tc.want, o.stderr)
			}
		})
	}
}

func TestConsoleStderr(t *testing.T) {
	r := testRunner(t)
	o := run(t, r, Config{Args: []string{"-e", `console.log("out"); console.error("err", {a: 1}); console.warn("warn")`}})
	if o.stdout != "out\n" || o.stderr != "err { a: 1 }\nwarn\n" {
		t.Errorf("stdout %q stderr %q", o.stdout, o.stderr)
	}
}

func TestCommandLine(t *testing.T) {
	r := testRunner(t)
	m, dir := tempMount(t)
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.js", `const lib = require('./lib'); const data = require('./data.json');
console.log(process.argv.slice(2).join(','), lib.add(2, 3), data.x, __filename, require.main === module);`)
	write("lib.js", `exports.add = (a, b) => a + b;`)
	write("data.json", `{"x": "json"}`)
	write("node_modules/pkg/package.json", `{"name": "pkg", "main": "main.js"}`)
	write("node_modules/pkg/main.js", `module.exports = 'from pkg';`)
	write("uses-pkg.js", `console.log(require('pkg'))`)
	write("esm.mjs", `import { add } from './lib.js'; import fs from 'node:fs'; import { join } from 'path';
console.log(add(1, 1), typeof fs.readFileSync, join('a', 'b'), import.meta.url);`)
	write("detect.js", `import os from 'os'; console.log('esm detected', os.EOL === '\n');`)
	write("tla.mjs", `const v = await new Promise((r) => setTimeout(() => r('tla'), 5)); console.log(v);`)
	write("sub/child.js", `console.log(require('../lib').add(1, 2), __dirname);`)
	write("shebang.js", "#!/usr/bin/env node\nconsole.log('bang')")
	write("syntax.js", "let = ;")

	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		out   string // exact stdout, unless prefix is set
		err   string // substring of stderr
	}{
		{"eval", []string{"-e", "console.log(1 + 1)"}, "", 0, "2\n", ""},
		{"eval args", []string{"-e", "console.log(process.argv.slice(1))", "a", "b"}, "", 0, "[ 'a', 'b' ]\n", ""},
		{"print", []string{"-p", "[1, 2].map(x => x * 2)"}, "", 0, "[ 2, 4 ]\n", ""},
		{"print string", []string{"-p", "'a' + 'b'"}, "", 0, "ab\n", ""},
		{"file with args", []string{"main.js", "x", "y"}, "", 0, "x,y 5 json /work/main.js true\n", ""},
		{"file without extension", []string{"main", "z"}, "", 0, "z 5 json /work/main.js true\n", ""},
		{"node_modules", []string{"uses-pkg.js"}, "", 0, "from pkg\n", ""},
		{"subdir require", []string{"sub/child.js"}, "", 0, "3 /work/sub\n", ""},
		{"esm", []string{"esm.mjs"}, "", 0, "2 function a/b file:///work/esm.mjs\n", ""},
		{"esm detection", []string{"detect.js"}, "", 0, "esm detected true\n", ""},
		{"top-level await", []string{"tla.mjs"}, "", 0, "tla\n", ""},
		{"eval esm", []string{"-e", "import p from 'path'; console.log(p.sep)"}, "", 0, "/\n", ""},
		{"shebang", []string{"shebang.js"}, "", 0, "bang\n", ""},
		{"stdin script", nil, "console.log('from stdin')", 0, "from stdin\n", ""},
		{"dash stdin", []string{"-", "q"}, "console.log(process.argv[1])", 0, "q\n", ""},
		{"version", []string{"--version"}, "", 0, r.Version() + "\n", ""},
		{"check ok", []string{"--check", "main.js"}, "", 0, "", ""},
		{"check bad", []string{"-c", "syntax.js"}, "", 1, "", "SyntaxError"},
		{"syntax error", []string{"syntax.js"}, "", 1, "", "SyntaxError"},
		{"missing file", []string{"nope.js"}, "", 1, "", "Cannot find module '/work/nope.js'"},
		{"bad option", []string{"--bogus", "x.js"}, "", 9, "", "node: bad option: --bogus"},
		{"ignored option", []string{"--no-warnings", "-e", "console.log('ok')"}, "", 0, "ok\n", ""},
		{"missing eval arg", []string{"-e"}, "", 9, "", "-e requires an argument"},
		{"preload", []string{"-r", "./lib.js", "-e", "console.log(require.cache['/work/lib.js'] !== undefined)"}, "", 0, "true\n", ""},
		{"require missing", []string{"-e", "require('./nope')"}, "", 1, "", "Cannot find module './nope'"},
		{"stdin read", []string{"-e", "console.log(require('fs').readFileSync(0, 'utf8').toUpperCase())"}, "piped", 0, "PIPED\n", ""},
		{"dev stdin", []string{"-e", "require('fs').writeFileSync('/dev/stdout', require('fs').readFileSync('/dev/stdin', 'utf8'))"}, "echo", 0, "echo", ""},
		{"stdin events", []string{"-e", "let d = ''; process.stdin.on('data', (c) => d += c); process.stdin.on('end', () => console.log(d.trim().split('\\n').length))"}, "a\nb\nc\n", 0, "3\n", ""},
		{"readline", []string{"-e", "const rl = require('readline').createInterface({input: process.stdin}); const ls = []; rl.on('line', (l) => ls.push(l)); rl.on('close', () => console.log(ls))"}, "x\ny", 0, "[ 'x', 'y' ]\n", ""},
		{"env and cwd", []string{"-e", "console.log(process.env.FOO, process.cwd(), process.platform)"}, "", 0, "bar /work wasi\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := run(t, r, Config{Args: tc.args, FS: m, Dir: "/work", Env: map[string]string{"FOO": "bar"}, Stdin: strings.NewReader(tc.stdin)})
			if o.err != nil || o.ExitCode != tc.code || (tc.out != "" || tc.code == 0) && o.stdout != tc.out || !strings.Contains(o.stderr, tc.err) {
				t.Errorf("exit %d (want %d) err %v\nstdout %q\nwant   %q\nstderr %s", o.ExitCode, tc.code, o.err, o.stdout, tc.out, o.stderr)
			}
		})
	}
}

func TestFS(t *testing.T) {
	r := testRunner(t)
	m, dir := tempMount(t)
	code := `
const fs = require('fs');
fs.mkdirSync('/work/a/b', {recursive: true});
fs.writeFileSync('/work/a/b/f.txt', 'hello');
fs.appendFileSync('a/b/f.txt', ' world');
console.log(fs.readFileSync('/work/a/b/f.txt', 'utf8'), fs.statSync('a/b/f.txt').size, fs.statSync('a').isDirectory());
console.log(fs.readdirSync('a/b'), fs.existsSync('a/b/f.txt'), fs.existsSync('a/nope'));
fs.renameSync('a/b/f.txt', 'a/g.txt');
fs.copyFileSync('a/g.txt', 'a/h.txt');
console.log(fs.readdirSync('a', {withFileTypes: true}).map((d) => d.name + (d.isDirectory() ? '/' : '')));
try { fs.readFileSync('/work/missing.txt'); } catch (e) { console.log(e.code, e.message, e.errno, e.syscall); }
try { fs.mkdirSync('a'); } catch (e) { console.log(e.code); }
try { fs.rmdirSync('a'); } catch (e) { console.log(e.code); }
try { fs.writeFileSync('/elsewhere/x', 'x'); } catch (e) { console.log(e.code); }
fs.writeFileSync('/work/bin', Buffer.from([0, 1, 255]));
console.log(fs.readFileSync('/work/bin'));
fs.rmSync('a', {recursive: true});
fs.unlinkSync('bin');
console.log(fs.readdirSync('.'));
fs.promises.writeFile('p.txt', 'async').then(() => fs.promises.readFile('p.txt', 'utf8')).then((s) => console.log(s));
`
	o := run(t, r, Config{Args: []string{"-e", code}, FS: m, Dir: "/work"})
	want := `hello world 11 true
[ 'f.txt' ] true false
[ 'b/', 'g.txt', 'h.txt' ]
ENOENT ENOENT: no such file or directory, open '/work/missing.txt' -2 open
EEXIST
ENOTEMPTY
ENOENT
<Buffer 00 01 ff>
[]
async
`
	if o.err != nil || o.ExitCode != 0 || o.stdout != want {
		t.Fatalf("exit %d err %v\nstdout:\n%s\nwant:\n%s\nstderr: %s", o.ExitCode, o.err, o.stdout, want, o.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "p.txt")); err != nil || string(b) != "async" {
		t.Errorf("host sees p.txt = %q, %v", b, err)
	}
}

// fullFS fails every open for writing with ENOSPC, as a mount over a full disk or quota would.
type fullFS struct{ experimentalsys.FS }

func (f fullFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0 {
		return nil, ENOSPC
	}
	return f.FS.OpenFile(p, flag, perm)
}

// Errors from the mounted filesystems surface as node's error codes and messages.
func TestFSErrnos(t *testing.T) {
	r := testRunner(t)
	m := testMounts{"/ro": &sysfs.ReadFS{FS: sysfs.DirFS(t.TempDir())}, "/full": fullFS{sysfs.DirFS(t.TempDir())}}
	code := `const fs = require('fs');
for (const f of [() => fs.mkdirSync('/ro/d'), () => fs.writeFileSync('/full/x', 'x'), () => fs.renameSync('/full', '/ro/y'), () => fs.readFileSync('/unmounted/z')]) {
  try { f() } catch (e) { console.log(e.code, e.message) }
}`
	o := run(t, r, Config{Args: []string{"-e", code}, FS: m, Dir: "/"})
	want := `EROFS EROFS: read-only file system, mkdir '/ro/d'
ENOSPC ENOSPC: no space left on device, open '/full/x'
EXDEV EXDEV: cross-device link not permitted, rename '/full' -> '/ro/y'
ENOENT ENOENT: no such file or directory, open '/unmounted/z'
`
	if o.stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s\nstderr: %s", o.stdout, want, o.stderr)
	}
}

// A file too big for the guest's memory limit fails like node's 2 GiB limit, without the host
// reading it all first.
func TestFSFileTooLarge(t *testing.T) {
	r := testRunner(t)
	m, dir := tempMount(t)
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 9<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	o := run(t, r, Config{Args: []string{"-e", `try { require('fs').readFileSync('/work/big') } catch (e) { console.log(e.code) }`}, FS: m, MemoryLimit: 8 << 20})
	if o.stdout != "ERR_FS_FILE_TOO_LARGE\n" {
		t.Errorf("stdout %q stderr %s", o.stdout, o.stderr)
	}
}

func TestExitCodes(t *testing.T) {
	r := testRunner(t)
	for _, tc := range []struct {
		name, code string
		exit       int
		out, err   string
	}{
		{"exit 3 flushes", `console.log("before"); process.stdout.write("partial"); process.exit(3); console.log("after")`, 3, "before\npartial", ""},
		{"exitCode", `process.exitCode = 4; console.log("set")`, 4, "set\n", ""},
		{"exit handlers", `process.on("exit", (c) => console.log("exit", c)); process.exit(2)`, 2, "exit 2\n", ""},
		{"throw", `console.log("x"); throw new TypeError("bad thing")`, 1, "x\n", "TypeError: bad thing\n    at [eval]:1:"},
		{"throw string", `throw "str"`, 1, "", "Uncaught 'str'"},
		{"rejection", `Promise.reject(new Error("nope"))`, 1, "", "Error: nope"},
		{"async rejection", `(async () => { await null; throw new RangeError("late") })()`, 1, "", "RangeError: late"},
		{"rejection non-error", `Promise.reject(42)`, 1, "", `The promise rejected with the reason "42".`},
		{"rejection after caught throw", `try { throw "s" } catch {} Promise.reject(new Error("after"))`, 1, "", "Error: after"},
		{"handled rejection", `const p = Promise.reject(new Error("x")); setTimeout(() => p.catch(() => {}), 0); console.log("ok")`, 1, "ok\n", "Error: x"},
		{"caught rejection", `Promise.reject(new Error("x")).catch((e) => console.log("caught", e.message))`, 0, "caught x\n", ""},
		{"timer throw", `setTimeout(() => { throw new Error("in timer") }, 1)`, 1, "", "Error: in timer"},
		{"uncaughtException listener", `process.on("uncaughtException", (e) => console.log("handled", e.message)); setTimeout(() => { throw new Error("t") }, 1); setTimeout(() => console.log("alive"), 5)`, 0, "handled t\nalive\n", ""},
		{"stack overflow", `function f() { f() } f()`, 1, "", "RangeError: Maximum call stack size exceeded"},
		{"fs error uncaught", `require("fs").readFileSync("/nope")`, 1, "", "code: 'ENOENT'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := run(t, r, Config{Args: []string{"-e", tc.code}})
			if o.err != nil || o.ExitCode != tc.exit || o.stdout != tc.out || !strings.Contains(o.stderr, tc.err) {
				t.Errorf("exit %d (want %d) err %v\nstdout %q (want %q)\nstderr %s", o.ExitCode, tc.exit, o.err, o.stdout, tc.out, o.stderr)
			}
		})
	}
}

func TestEventLoop(t *testing.T) {
	r := testRunner(t)
	code := `
const log = [];
setTimeout(() => log.push('t150'), 150);
setTimeout(() => log.push('t0'), 0);
setTimeout(() => log.push('t50'), 50);
setImmediate(() => log.push('immediate'));
process.nextTick(() => log.push('tick'));
Promise.resolve().then(() => log.push('micro1')).then(() => log.push('micro2'));
queueMicrotask(() => log.push('qm'));
(async () => { await null; log.push('async1'); await new Promise((r) => setTimeout(r, 100)); log.push('async100'); })();
let n = 0; const iv = setInterval(() => { log.push('iv' + (++n)); if (n === 2) clearInterval(iv); }, 5);
const cancelled = setTimeout(() => log.push('cancelled'), 5); clearTimeout(cancelled);
setTimeout(() => log.push('unref'), 1000).unref();
log.push('sync');
process.on('exit', () => console.log(log.join(' ')));
`
	o := run(t, r, Config{Args: []string{"-e", code}})
	// Timers at 5/10 (interval), 50, 100 and 150 ms run in deadline order.
	want := "sync tick micro1 qm async1 micro2 immediate t0 iv1 iv2 t50 async100 t150\n"
	if o.err != nil || o.ExitCode != 0 || o.stdout != want {
		t.Errorf("exit %d err %v\nstdout %q\nwant   %q\nstderr %s", o.ExitCode, o.err, o.stdout, want, o.stderr)
	}
}

func TestInterrupt(t *testing.T) {
	r := testRunner(t)
	for _, code := range []string{
		"for (;;) {}",
		"while (true) { try { for (;;) {} } catch (e) {} }",
		"setTimeout(() => {}, 1e9)",
		"/(a+)+$/.test('a'.repeat(40) + 'b')",
		"require('fs').readFileSync(0)", // stdin that never ends
	} {
		t.Run(code, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			pr, pw := io.Pipe()
			defer pw.Close()
			start := time.Now()
			res, err := r.Run(ctx, Config{Args: []string{"-e", code}, Stdin: pr})
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("took %v", took)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v (result %+v), want deadline exceeded", err, res)
			}
		})
	}
}

func TestMemoryLimit(t *testing.T) {
	bomb := "let a = []; for (;;) a.push(new Array(1e6).fill(1))"
	t.Run("quickjs limit", func(t *testing.T) {
		r := testRunner(t)
		o := run(t, r, Config{Args: []string{"-e", bomb}, MemoryLimit: 64 << 20})
		if o.err != nil || o.ExitCode != 1 || !o.OOM || !strings.Contains(o.stderr, "InternalError: out of memory") {
			t.Errorf("exit %d oom %v err %v stderr %s", o.ExitCode, o.OOM, o.err, o.stderr)
		}
	})
	t.Run("caught", func(t *testing.T) {
		r := testRunner(t)
		o := run(t, r, Config{Args: []string{"-e", "let a = []; try { " + bomb + " } catch (e) { a = null; console.log(e.message) }"}, MemoryLimit: 64 << 20})
		if o.err != nil || o.ExitCode != 0 || !o.OOM || o.stdout != "out of memory\n" {
			t.Errorf("exit %d oom %v err %v stdout %q stderr %s", o.ExitCode, o.OOM, o.err, o.stdout, o.stderr)
		}
	})
	t.Run("wasm memory pages", func(t *testing.T) {
		wasm := mustReadWasm(t)
		ctx := context.Background()
		rt := newTestRuntime(ctx, 1024) // 64 MiB
		defer rt.Close(ctx)
		r, err := NewRunner(ctx, rt, wasm)
		if err != nil {
			t.Fatal(err)
		}
		o := run(t, r, Config{Args: []string{"-e", bomb}})
		if o.err != nil || o.ExitCode != 1 || !o.OOM || !strings.Contains(o.stderr, "out of memory") {
			t.Errorf("exit %d oom %v err %v stderr %s", o.ExitCode, o.OOM, o.err, o.stderr)
		}
		// The runner still works after a run exhausted its memory.
		if o := run(t, r, Config{Args: []string{"-p", "6 * 7"}}); o.stdout != "42\n" {
			t.Errorf("after OOM: %q %s", o.stdout, o.stderr)
		}
	})
}

func TestUnavailableModules(t *testing.T) {
	r := testRunner(t)
	for _, mod := range []string{"child_process", "net", "http", "https", "dgram", "tls", "dns", "worker_threads", "cluster"} {
		o := run(t, r, Config{Args: []string{"-e", fmt.Sprintf(`try { require(%q) } catch (e) { console.log(e.code, e.message) }`, mod)}})
		if !strings.HasPrefix(o.stdout, "ERR_UNAVAILABLE Module '"+mod+"' is not available in airlock's wasm sandbox") {
			t.Errorf("%s: %q %s", mod, o.stdout, o.stderr)
		}
	}
	o := run(t, r, Config{Args: []string{"-e", `import("node:net").catch((e) => console.log(e.code))`}})
	if o.stdout != "ERR_UNAVAILABLE\n" {
		t.Errorf("import(net): %q %s", o.stdout, o.stderr)
	}
	o = run(t, r, Config{Args: []string{"-e", `try { require("left-pad") } catch (e) { console.log(e.code, e.message.split("\n")[0]) }`}})
	if o.stdout != "MODULE_NOT_FOUND Cannot find module 'left-pad'\n" {
		t.Errorf("unknown module: %q %s", o.stdout, o.stderr)
	}
}

func TestConcurrentRuns(t *testing.T) {
	r := testRunner(t)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m, _ := tempMount(t)
			code := fmt.Sprintf(`const fs = require('fs'); fs.writeFileSync('/work/x', '%d');
setTimeout(() => { console.log(fs.readFileSync('/work/x', 'utf8') * 2, Math.random() < 1); process.exitCode = %d }, %d)`, i, i%7, i%5)
			o := run(t, r, Config{Args: []string{"-e", code}, FS: m, Dir: "/work"})
			if want := fmt.Sprintf("%d true\n", 2*i); o.err != nil || o.stdout != want || o.ExitCode != i%7 {
				errs <- errors.Join(fmt.Errorf("run %d: exit %d stdout %q stderr %s", i, o.ExitCode, o.stdout, o.stderr), o.err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Math.random must differ between runs even though every run starts from the same snapshot.
func TestRandomPerRun(t *testing.T) {
	r := testRunner(t)
	a := run(t, r, Config{Args: []string{"-p", "Math.random()"}})
	b := run(t, r, Config{Args: []string{"-p", "Math.random()"}})
	if a.stdout == b.stdout || a.stdout == "" {
		t.Errorf("Math.random repeated: %q %q", a.stdout, b.stdout)
	}
}

// A runtime configured with WithCloseOnContextDone works too (slower: see the package doc).
func TestCloseOnContextDoneRuntime(t *testing.T) {
	wasm := mustReadWasm(t)
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	r, err := NewRunner(ctx, rt, wasm)
	if err != nil {
		t.Fatal(err)
	}
	if o := run(t, r, Config{Args: []string{"-e", "console.log({a: 1})"}}); o.stdout != "{ a: 1 }\n" {
		t.Errorf("stdout %q stderr %s", o.stdout, o.stderr)
	}
	ctx2, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := r.Run(ctx2, Config{Args: []string{"-e", "for(;;){}"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
	// A second Runner on the same runtime shares the env module.
	if _, err := NewRunner(ctx, rt, wasm); err != nil {
		t.Errorf("second runner: %v", err)
	}
}
