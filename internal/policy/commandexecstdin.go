package policy

import (
	"fmt"
	"path"
	"strings"
)

// Keystrokes fed to a container's or a pod's program (branch cmd50):
// printf 'rm -rf ~\n' | docker exec -i c sh runs rm in the container,
// which the matcher cannot read: the command is the input, not a word.
// docker, podman and nerdctl exec, run and start with -i (--interactive),
// attach (stdin attached unless --no-stdin), compose exec and run (stdin
// attached by default), kubectl and oc exec, run and attach with -i
// (--stdin), lxc and incus exec: when the command string feeds their
// input (a pipe, a redirection, a here-document), the call is opaque. A
// -i anywhere in the words counts (fails closed: docker exec c grep -i x
// fed by a pipe is refused too).

// fedExecCode says why words (a simple command whose input the command
// string feeds) pass that input to a program in a container or pod, or
// "".
func fedExecCode(words []cmdWord) string {
	if len(words) < 2 || words[0].unknown {
		return ""
	}
	name := programName(path.Base(words[0].lit))
	var subs []string
	switch name {
	case "docker", "podman", "nerdctl":
		subs = []string{"exec", "run", "start", "attach", "compose", "container"}
	case "kubectl", "oc":
		subs = []string{"exec", "run", "attach"}
	case "lxc", "incus":
		subs = []string{"exec"}
	default:
		return ""
	}
	k := subcommandAt(words[1:], subs...)
	if k < 0 {
		return ""
	}
	sub, rest := words[1+k].lit, words[2+k:]
	always := name == "lxc" || name == "incus"
	if sub == "container" || sub == "compose" {
		j := subcommandAt(rest, "exec", "run", "start", "attach")
		if j < 0 {
			return ""
		}
		always = sub == "compose"
		sub, rest = rest[j].lit, rest[j+1:]
	}
	if sub == "attach" {
		always = !hasWord(rest, "--no-stdin")
	}
	if always || interactiveFlag(rest) {
		return fmt.Sprintf("%s %s passes its input, which the command string feeds, to a program that may read it as commands the matcher cannot read", name, sub)
	}
	return ""
}

// interactiveFlag reports whether words hold -i, --interactive or
// --stdin (also in a cluster of short options: -it, and not literal).
func interactiveFlag(words []cmdWord) bool {
	for _, w := range words {
		if w.unknown {
			return true
		}
		opt, val, _ := strings.Cut(w.lit, "=")
		switch {
		case opt == "--interactive" || opt == "--stdin":
			return val != "false"
		case len(opt) > 1 && opt[0] == '-' && opt[1] != '-' && strings.Contains(opt, "i"):
			return true
		}
	}
	return false
}

func hasWord(words []cmdWord, s string) bool {
	for _, w := range words {
		if w.lit == s {
			return true
		}
	}
	return false
}

// fedExec is fedExecCode for words and, after a wrapper (sudo, timeout,
// env), for the command it runs.
func fedExec(words []cmdWord) string {
	if why := fedExecCode(words); why != "" {
		return why
	}
	if s := wrapperStart(words); s > 0 {
		for i := s; i < len(words); i++ {
			if why := fedExecCode(words[i:]); why != "" {
				return why
			}
		}
	}
	return ""
}
