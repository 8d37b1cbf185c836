package node

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// opFunc is a host function the prelude calls. It returns a handle, or 0 after making an
// exception pending (usually a bare errno string like "ENOENT", which the prelude turns into a
// node-shaped Error with the syscall and path it knows).
type opFunc func(v *vm, args []uint32) uint32

// opTable is the whole host surface the guest sees: each entry becomes one JS function on the
// prelude's private ops object.
var opTable = map[string]opFunc{}

func init() {
	for name, fn := range map[string]opFunc{
		"write": opWrite, "exit": opExit, "readStdin": opReadStdin, "hrtime": opHrtime,
		"evalScript": opEvalScript, "evalModule": opEvalModule, "compile": opCompile,
		"promiseState": opPromiseState, "promiseResult": opPromiseResult,
		"memoryUsage": opMemoryUsage, "oom": opOOM, "encode": opEncode, "decode": opDecode, "hash": opHash, "hmac": opHmac, "random": opRandom,
	} {
		opTable[name] = fn
	}
	for name, fn := range fsOps {
		opTable[name] = fn
	}
}

// Argument helpers: a missing argument reads as undefined would (empty, 0, false).

func (v *vm) argStr(args []uint32, i int) string {
	if i >= len(args) {
		return ""
	}
	s, _ := v.g.str(args[i])
	return s
}

func (v *vm) argNum(args []uint32, i int) float64 {
	if i >= len(args) {
		return 0
	}
	return v.g.num(args[i])
}

func (v *vm) argInt(args []uint32, i int) int {
	f := v.argNum(args, i)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return int(f)
}

func (v *vm) argBool(args []uint32, i int) bool { return v.argNum(args, i) != 0 }

// argBytes reads a string (as UTF-8) or an ArrayBuffer.
func (v *vm) argBytes(args []uint32, i int) ([]byte, bool) {
	if i >= len(args) {
		return nil, false
	}
	return v.g.bytes(args[i])
}

// fail throws an errno code string; the prelude adds syscall and path.
func (v *vm) fail(code string) uint32 {
	v.g.throwValue(v.g.newString(code))
	return 0
}

func (v *vm) failErrno(e experimentalsys.Errno) uint32 { return v.fail(errnoCode(e)) }

func (v *vm) str(s string) uint32 { return v.g.newString(s) }

func (v *vm) undef() uint32 { return v.g.undefined() }

// write(fd, data): fd 1 and 2 are the run's stdout and stderr, others fs.openSync files.
func opWrite(v *vm, args []uint32) uint32 {
	fd := v.argInt(args, 0)
	data, ok := v.argBytes(args, 1)
	if !ok {
		return v.fail("EINVAL")
	}
	switch fd {
	case 1:
		v.stdout.write(data)
	case 2:
		v.stderr.write(data)
	default:
		return v.fdWrite(fd, data, -1)
	}
	return v.g.newNumber(float64(len(data)))
}

// exit(code) ends the run at once, as WASI's proc_exit does: close the module, then panic with
// the exit error wazero recognises. Output is flushed first.
func opExit(v *vm, args []uint32) uint32 {
	code := v.argInt(args, 0)
	v.exitRequested = true
	v.exitCode = code & 0xff
	v.flush()
	panic(exitPanic(v, code))
}

// readStdin() returns the rest of stdin as a string, readStdin(true) as an ArrayBuffer. It
// blocks, but gives up when the run's context ends.
func opReadStdin(v *vm, args []uint32) uint32 {
	asBytes := v.argBool(args, 0)
	if v.stdinDone {
		if asBytes {
			return v.g.newArrayBuffer(nil)
		}
		return v.str("")
	}
	v.flush() // a prompt written before reading must be visible
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	limit := v.maxRead()
	stdin := v.cfg.Stdin
	go func() {
		b, err := io.ReadAll(io.LimitReader(stdin, limit+1))
		ch <- result{b, err}
	}()
	var res result
	select {
	case res = <-ch:
	case <-v.done:
		return v.fail("EINTR")
	}
	v.stdinDone = true
	if res.err != nil && len(res.b) == 0 {
		return v.fail("EIO")
	}
	if int64(len(res.b)) > limit {
		return v.failErrno(errTooLarge)
	}
	if asBytes {
		return v.g.newArrayBuffer(res.b)
	}
	return v.str(validUTF8(res.b))
}

// hrtime() is nanoseconds since the run started (a float64 is exact for 104 days).
func opHrtime(v *vm, _ []uint32) uint32 {
	return v.g.newNumber(float64(time.Since(v.start).Nanoseconds()))
}

const (
	evalTypeModule  = 1 << 0
	evalCompileOnly = 1 << 5
)

// evalScript(code, filename) evaluates a classic script in the global scope and returns its
// completion value.
func opEvalScript(v *vm, args []uint32) uint32 {
	return v.evalResult(v.g.eval(v.argStr(args, 0), v.argStr(args, 1), 0))
}

// compile(code, filename, isModule) only parses, for `node --check`.
func opCompile(v *vm, args []uint32) uint32 {
	flags := evalCompileOnly
	if v.argBool(args, 2) {
		flags |= evalTypeModule
	}
	h := v.evalResult(v.g.eval(v.argStr(args, 0), v.argStr(args, 1), flags))
	if h != 0 {
		v.g.freeValue(h)
		return v.undef()
	}
	return 0
}

// evalModule(code, filename) evaluates an ES module and returns the promise of its namespace.
func opEvalModule(v *vm, args []uint32) uint32 {
	return v.evalResult(v.g.eval(v.argStr(args, 0), v.argStr(args, 1), evalTypeModule))
}

// evalResult passes an eval result on: 0 (exception pending) when it is an exception.
func (v *vm) evalResult(h uint32) uint32 {
	if h == 0 {
		return 0
	}
	if v.g.isException(h) {
		v.g.freeValue(h)
		return 0
	}
	return h
}

// promiseState(p) is 0 (pending), 1 (fulfilled) or 2 (rejected), for util.inspect; -1 for a
// non-promise.
func opPromiseState(v *vm, args []uint32) uint32 {
	if len(args) == 0 {
		return v.g.newNumber(-1)
	}
	return v.g.newNumber(float64(int32(v.g.must(fPromiseState, uint64(args[0])))))
}

// promiseResult(p) is a settled promise's value or reason.
func opPromiseResult(v *vm, args []uint32) uint32 {
	if len(args) == 0 {
		return v.undef()
	}
	return v.g.must(fPromiseResult, uint64(args[0]))
}

// exitPanic closes the module with code and returns the panic value that makes wazero unwind
// the guest and return *sys.ExitError, exactly as WASI's proc_exit does.
func exitPanic(v *vm, code int) any {
	_ = v.g.mod.CloseWithExitCode(v.g.ctx, uint32(code)) // the panic unwinds the guest either way
	return sys.NewExitError(uint32(code))
}

// oom() records that QuickJS ran out of memory (called when its "out of memory" error is built).
func opOOM(v *vm, _ []uint32) uint32 {
	v.oom = true
	return v.undef()
}

// memoryUsage() is the size of the instance's linear memory, process.memoryUsage().rss.
func opMemoryUsage(v *vm, _ []uint32) uint32 { return v.g.newNumber(float64(v.g.mem.Size())) }

// encode(string, encoding) returns the bytes of a string as an ArrayBuffer.
func opEncode(v *vm, args []uint32) uint32 {
	s, enc := v.argStr(args, 0), strings.ToLower(v.argStr(args, 1))
	var b []byte
	switch enc {
	case "", "utf8", "utf-8":
		b = []byte(wtf8ToUTF8(s))
	case "hex":
		// Node decodes pairs until the first invalid one.
		n := len(s) / 2
		b = make([]byte, 0, n)
		for i := 0; i < n; i++ {
			x, err := hex.DecodeString(s[2*i : 2*i+2])
			if err != nil {
				break
			}
			b = append(b, x[0])
		}
	case "base64", "base64url":
		b = decodeBase64Loose(s)
	case "latin1", "binary", "ascii":
		for _, r := range utf16Units(s) {
			b = append(b, byte(r))
		}
	case "utf16le", "utf-16le", "ucs2", "ucs-2":
		for _, r := range utf16Units(s) {
			b = append(b, byte(r), byte(r>>8))
		}
	default:
		return v.fail("ERR_UNKNOWN_ENCODING")
	}
	return v.g.newArrayBuffer(b)
}

// decode(arrayBuffer, encoding) turns bytes into a string.
func opDecode(v *vm, args []uint32) uint32 {
	b, ok := v.argBytes(args, 0)
	if !ok {
		return v.fail("EINVAL")
	}
	switch strings.ToLower(v.argStr(args, 1)) {
	case "", "utf8", "utf-8":
		return v.str(validUTF8(b))
	case "hex":
		return v.str(hex.EncodeToString(b))
	case "base64":
		return v.str(base64.StdEncoding.EncodeToString(b))
	case "base64url":
		return v.str(base64.RawURLEncoding.EncodeToString(b))
	case "latin1", "binary":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		return v.str(string(r))
	case "ascii":
		r := make([]byte, len(b))
		for i, c := range b {
			r[i] = c & 0x7f
		}
		return v.str(string(r))
	case "utf16le", "utf-16le", "ucs2", "ucs-2":
		u := make([]uint16, len(b)/2)
		for i := range u {
			u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
		}
		return v.str(string(utf16.Decode(u)))
	}
	return v.fail("ERR_UNKNOWN_ENCODING")
}

func newHash(alg string) func() hash.Hash {
	switch strings.ToLower(strings.ReplaceAll(alg, "-", "")) {
	case "md5":
		return md5.New
	case "sha1":
		return sha1.New
	case "sha224":
		return sha256.New224
	case "sha256":
		return sha256.New
	case "sha384":
		return sha512.New384
	case "sha512":
		return sha512.New
	}
	return nil
}

// hash(alg, data) returns the digest as an ArrayBuffer.
func opHash(v *vm, args []uint32) uint32 {
	h := newHash(v.argStr(args, 0))
	if h == nil {
		return v.fail("ERR_DIGEST_UNSUPPORTED")
	}
	data, _ := v.argBytes(args, 1)
	d := h()
	d.Write(data)
	return v.g.newArrayBuffer(d.Sum(nil))
}

// hmac(alg, key, data) returns the MAC as an ArrayBuffer.
func opHmac(v *vm, args []uint32) uint32 {
	h := newHash(v.argStr(args, 0))
	if h == nil {
		return v.fail("ERR_DIGEST_UNSUPPORTED")
	}
	key, _ := v.argBytes(args, 1)
	data, _ := v.argBytes(args, 2)
	m := hmac.New(h, key)
	m.Write(data)
	return v.g.newArrayBuffer(m.Sum(nil))
}

// random(n) returns n random bytes as an ArrayBuffer.
func opRandom(v *vm, args []uint32) uint32 {
	n := v.argInt(args, 0)
	if n < 0 || n > 1<<20 {
		return v.fail("ERR_OUT_OF_RANGE")
	}
	b := make([]byte, n)
	rand.Read(b)
	return v.g.newArrayBuffer(b)
}

// utf16Units decodes WTF-8 into UTF-16 code units, surrogates included.
func utf16Units(s string) []uint16 {
	var out []uint16
	for i := 0; i < len(s); {
		if r, n, ok := surrogateAt(s, i); ok {
			out = append(out, uint16(r))
			i += n
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			a, b := utf16.EncodeRune(r)
			out = append(out, uint16(a), uint16(b))
		} else {
			out = append(out, uint16(r))
		}
		i += n
	}
	return out
}

// surrogateAt recognises a WTF-8 encoded lone surrogate (ED A0..BF xx).
func surrogateAt(s string, i int) (rune, int, bool) {
	if i+2 < len(s) && s[i] == 0xED && s[i+1] >= 0xA0 && s[i+1] <= 0xBF {
		return rune(0xD000 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F)), 3, true
	}
	return 0, 0, false
}

// wtf8ToUTF8 replaces lone surrogates with U+FFFD, as Node's UTF-8 encoder does.
func wtf8ToUTF8(s string) string {
	if !strings.Contains(s, "\xed") || utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if _, n, ok := surrogateAt(s, i); ok {
			b.WriteString("\uFFFD")
			i += n
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// decodeBase64Loose decodes base64 or base64url, with or without padding, skipping whitespace
// and stopping at the first invalid character like Node.
func decodeBase64Loose(s string) []byte {
	var clean []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			clean = append(clean, c)
		case c == '+' || c == '-':
			clean = append(clean, '+')
		case c == '/' || c == '_':
			clean = append(clean, '/')
		case c == ' ' || c == '\n' || c == '\r' || c == '\t':
		default:
			i = len(s)
		}
	}
	if len(clean)%4 == 1 {
		clean = clean[:len(clean)-1]
	}
	b, _ := base64.RawStdEncoding.DecodeString(string(clean))
	return b
}
