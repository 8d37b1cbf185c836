package wasm

import (
	"fmt"
	"path"
	"strings"
)

// command is what an exec runs: an interpreter and its arguments.
type command struct {
	lang string            // langPython or langJS
	name string            // argv[0] as given, for messages and sys.argv
	args []string          // the arguments after the interpreter's name
	env  map[string]string // NAME=value words before the command (sh -c 'A=1 python3 ...')
}

// interpreters maps the command names agents use to the level's languages.
var interpreters = map[string]string{
	"python": langPython, "python3": langPython, "python3.11": langPython,
	"node": langJS, "nodejs": langJS,
}

// commandError is a command the level cannot run; exit is the status a shell would give.
type commandError struct {
	exit int
	msg  string
}

func (e *commandError) Error() string { return e.msg }

// parseCommand finds the interpreter in argv. Besides python3 ARGS and node ARGS (any path
// whose last element is one of the interpreters' names), it takes what a shell-less agent
// still sends: `sh -c LINE` (the API's string form of a command), when LINE is one simple command
// without shell syntax, and `env [NAME=value...] CMD ARGS`.
func parseCommand(argv []string) (command, error) {
	c := command{env: map[string]string{}}
	for depth := 0; ; depth++ {
		if len(argv) == 0 || argv[0] == "" {
			return c, &commandError{127, "airlock: empty command"}
		}
		if depth > 4 {
			return c, &commandError{126, "airlock: wasm level: too many nested sh -c / env wrappers"}
		}
		base := path.Base(argv[0])
		if lang, ok := interpreters[base]; ok {
			c.lang, c.name, c.args = lang, argv[0], argv[1:]
			return c, nil
		}
		switch base {
		case "sh", "bash", "dash":
			if len(argv) < 3 || argv[1] != "-c" {
				return c, &commandError{127, fmt.Sprintf("airlock: wasm level has no shell: %s runs only as `%s -c 'ONE SIMPLE COMMAND'`", argv[0], base)}
			}
			words, err := shellWords(argv[2])
			if err != nil {
				return c, &commandError{2, fmt.Sprintf("airlock: wasm level has no shell: %v; give the command as an argv array (python3 -c CODE, node -e CODE)", err)}
			}
			argv = takeAssignments(words, c.env)
		case "env":
			argv = takeAssignments(argv[1:], c.env)
		default:
			return c, &commandError{127, fmt.Sprintf("airlock: %s: command not found (the wasm level runs python3 and node only)", argv[0])}
		}
	}
}

// takeAssignments moves leading NAME=value words into env and returns the rest.
func takeAssignments(words []string, env map[string]string) []string {
	for len(words) > 0 {
		k, v, ok := strings.Cut(words[0], "=")
		if !ok || !isName(k) {
			break
		}
		env[k] = v
		words = words[1:]
	}
	return words
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// shellWords splits a line the way sh splits a simple command: words separated by blanks, single
// quotes literal, double quotes with \" \\ \$ \` escapes, backslash escaping outside quotes.
// Anything that needs a shell to mean something — pipes, redirections, lists, substitutions,
// globs, variables — is refused rather than passed on as text.
func shellWords(line string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == ' ' || ch == '\t':
			flush()
		case ch == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case ch == '"':
			inWord = true
			for i++; ; i++ {
				if i >= len(line) {
					return nil, fmt.Errorf("unterminated \" in %q", line)
				}
				c := line[i]
				if c == '"' {
					break
				}
				if c == '$' || c == '`' {
					return nil, fmt.Errorf("%q needs a shell (substitution in double quotes)", line)
				}
				if c == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0 {
					i++
					c = line[i]
				}
				cur.WriteByte(c)
			}
		case ch == '\\':
			if i+1 >= len(line) {
				return nil, fmt.Errorf("trailing backslash in %q", line)
			}
			i++
			cur.WriteByte(line[i])
			inWord = true
		case strings.IndexByte("|&;<>()$`*?[#~\n{}", ch) >= 0:
			return nil, fmt.Errorf("%q needs a shell (%q)", line, string(ch))
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	flush()
	if len(words) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	return words, nil
}
