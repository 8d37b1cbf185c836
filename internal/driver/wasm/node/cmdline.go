package node

import (
	"fmt"
	"strings"
)

// mode is what a node command line asks for.
type mode int

const (
	modeStdin   mode = iota // script from stdin (`node`, `node -`)
	modeEval                // -e CODE
	modePrint               // -p CODE
	modeFile                // FILE.js
	modeCheck               // -c FILE.js: syntax check only
	modeVersion             // --version
	modeHelp                // --help
)

func (m mode) String() string {
	return [...]string{"stdin", "eval", "print", "file", "check", "version", "help"}[m]
}

// invocation is a parsed node command line.
type invocation struct {
	mode      mode
	code      string   // -e / -p source
	script    string   // the script path as given
	args      []string // process.argv after the script
	execArgv  []string // the node options, as given
	preload   []string // -r modules
	inputType string   // --input-type: "module", "commonjs" or ""
	unhandled string   // --unhandled-rejections mode
}

// ignoredFlags are node options accepted and ignored: they tune V8 or diagnostics that have no
// meaning here. A trailing "=" matches any value; a trailing "*" any suffix.
var ignoredFlags = []string{
	"--no-warnings", "--no-deprecation", "--trace-warnings", "--trace-deprecation",
	"--trace-uncaught", "--enable-source-maps", "--experimental-*", "--no-experimental-*",
	"--max-old-space-size=", "--max-semi-space-size=", "--stack-size=", "--harmony*",
	"--title=", "--preserve-symlinks", "--preserve-symlinks-main", "--disable-warning=",
	"--abort-on-uncaught-exception", "--openssl-legacy-provider", "--dns-result-order=",
	"--use-strict", "--expose-gc", "--pending-deprecation", "--throw-deprecation",
	"--no-addons", "--conditions=", "--frozen-intrinsics", "--no-global-search-paths",
}

func ignored(flag string) bool {
	for _, f := range ignoredFlags {
		switch {
		case strings.HasSuffix(f, "*") && strings.HasPrefix(flag, f[:len(f)-1]):
			return true
		case strings.HasSuffix(f, "=") && strings.HasPrefix(flag, f):
			return true
		case flag == f:
			return true
		}
	}
	return false
}

// parseArgs parses the arguments after "node" the way node does: options first, then the script
// and its arguments (or, with -e/-p, the arguments of the evaluated code). The error is node's
// "bad option" message; the caller exits 9.
func parseArgs(argv []string) (invocation, error) {
	var inv invocation
	evalSet := false
	check := false
	i := 0
	next := func(flag string) (string, error) {
		if i+1 >= len(argv) {
			return "", fmt.Errorf("%s requires an argument", flag)
		}
		i++
		inv.execArgv = append(inv.execArgv, argv[i])
		return argv[i], nil
	}
	for ; i < len(argv); i++ {
		a := argv[i]
		if a == "-" || !strings.HasPrefix(a, "-") {
			break
		}
		inv.execArgv = append(inv.execArgv, a)
		if a == "--" {
			i++
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "--") {
			hasVal = false
			name = a
		}
		switch name {
		case "-v", "--version":
			return invocation{mode: modeVersion}, nil
		case "-h", "--help":
			return invocation{mode: modeHelp}, nil
		case "-e", "--eval", "-p", "--print", "-pe", "-ep":
			print := name == "-p" || name == "--print" || name == "-pe" || name == "-ep"
			code := val
			if !hasVal {
				// -p alone with nothing after it prints nothing useful; node requires code too.
				c, err := next(name)
				if err != nil {
					return inv, err
				}
				code = c
			}
			inv.code = code
			evalSet = true
			if print {
				inv.mode = modePrint
			} else if inv.mode != modePrint {
				inv.mode = modeEval
			}
		case "-c", "--check":
			check = true
		case "-r", "--require":
			m := val
			if !hasVal {
				c, err := next(name)
				if err != nil {
					return inv, err
				}
				m = c
			}
			inv.preload = append(inv.preload, m)
		case "--input-type":
			if !hasVal {
				c, err := next(name)
				if err != nil {
					return inv, err
				}
				val = c
			}
			if val != "module" && val != "commonjs" {
				return inv, fmt.Errorf("--input-type must be \"module\" or \"commonjs\"")
			}
			inv.inputType = val
		case "--unhandled-rejections":
			switch val {
			case "throw", "strict", "warn", "none", "warn-with-error-code":
				inv.unhandled = val
			default:
				return inv, fmt.Errorf("invalid value for --unhandled-rejections")
			}
		case "-i", "--interactive":
			return inv, fmt.Errorf("%s: the REPL is not available in airlock's wasm sandbox", a)
		default:
			if !ignored(a) {
				return inv, fmt.Errorf("bad option: %s", a)
			}
		}
	}
	rest := argv[i:]
	switch {
	case evalSet:
		inv.args = rest
	case len(rest) == 0 || rest[0] == "-":
		inv.mode = modeStdin
		if len(rest) > 0 {
			rest = rest[1:]
		}
		inv.args = rest
	default:
		inv.mode = modeFile
		inv.script = rest[0]
		inv.args = rest[1:]
	}
	if check && inv.mode == modeFile {
		inv.mode = modeCheck
	}
	if inv.args == nil {
		inv.args = []string{}
	}
	if inv.execArgv == nil {
		inv.execArgv = []string{}
	}
	if inv.preload == nil {
		inv.preload = []string{}
	}
	return inv, nil
}
