package policy

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Reads of secrets (branch attack49). The shell server's environment
// holds the agent's and the host's tokens, and the home directory the
// user's keys. On 28089b9d examples/build-agent.yaml allowed at once
// jq -n env, make -p (its database lists the environment), npm run env,
// cmake -E environment and cat /proc/self/envir''on, each printing every
// variable. The matcher reads words after the shell's quote removal, so
// a word naming an environ file, or a program printing the environment,
// makes the call opaque: an allow rule does not admit it and a deny or
// approve rule matches it. (Key files are the policy's to guard: a
// command that names ~/.ssh/id_ed25519 to use it is everyday.)

// jqEnv finds jq's env builtin and $ENV in a jq program: env not after a
// dot or a name's letter (.config.env is a field).
var jqEnv = regexp.MustCompile(`(^|[^A-Za-z0-9_.$])env([^A-Za-z0-9_]|$)|\$ENV|\$__prog_args`)

// secretsCode says why words (words[0] is the program, name its base
// name) read secrets: a word naming a process's environ file
// (/proc/self/environ), or a program printing its environment (jq's env, make
// -p, npm run env, cmake -E environment). "" when they do not.
func secretsCode(name string, words []cmdWord) string {
	for _, w := range words[1:] {
		_, v, _ := strings.Cut(w.lit, "=")
		if !w.unknown && (path.Base(w.lit) == "environ" || path.Base(v) == "environ") {
			return fmt.Sprintf("%s reads %q, a process's environment, which holds credentials", name, w.lit)
		}
	}
	dump := func() string { return fmt.Sprintf("%s prints the environment, which holds credentials", name) }
	switch name {
	case "jq", "gojq", "jaq":
		for _, w := range words[1:] {
			if w.lit == "-f" || w.lit == "--from-file" || strings.HasPrefix(w.lit, "-L") || strings.HasPrefix(w.lit, "--library-path") {
				return fmt.Sprintf("%s %s reads a program (env prints the environment) the matcher cannot read", name, w.lit)
			}
			if !strings.HasPrefix(w.lit, "-") && (jqEnv.MatchString(w.lit) || strings.Contains(w.lit, "import") || strings.Contains(w.lit, "include")) {
				return dump()
			}
		}
	case "make", "gmake":
		for _, w := range words[1:] {
			if w.lit == "--" {
				break
			}
			if opt, _, _ := strings.Cut(w.lit, "="); strings.HasPrefix(opt, "--") && longOption(opt, "--print-data-base") {
				return dump()
			}
			if !strings.HasPrefix(w.lit, "-") || strings.HasPrefix(w.lit, "--") {
				continue
			}
			for j := 1; j < len(w.lit); j++ {
				if w.lit[j] == 'p' {
					return dump()
				}
				if strings.IndexByte("CfIoWEjlO", w.lit[j]) >= 0 {
					break // the rest is its value
				}
			}
		}
	case "npm", "pnpm":
		for i := 1; i+1 < len(words); i++ {
			if contains([]string{"run", "run-script", "rum", "urn"}, words[i].lit) {
				for _, a := range words[i+1:] {
					if !strings.HasPrefix(a.lit, "-") {
						if a.lit == "env" {
							return dump()
						}
						return ""
					}
				}
			}
		}
	case "cmake":
		for i := 1; i+1 < len(words); i++ {
			if words[i].lit == "-E" && words[i+1].lit == "environment" {
				return dump()
			}
		}
	}
	return ""
}
