package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"
)

// A command ssh runs on the remote host is shell code: ssh joins its
// words with spaces and the remote user's shell parses the result, so
// "ssh host 'ls; rm x'" and "ssh host git log '$(rm x)'" run rm there. The
// matcher parses that string as it parses the whole command (as bash -c
// would), for deny and approve rules (its simple commands are matched, its
// opaque code makes the command opaque) and for an allow rule (it must be
// safe, and each of its simple commands must match a pattern as ssh's
// words followed by that command: "ssh prod uptime *" allows "ssh prod
// uptime" but not "ssh prod 'uptime; rm x'").

// maxRemoteDepth bounds ssh inside ssh's remote command (each level is
// parsed again); deeper nesting is opaque.
const maxRemoteDepth = 4

// sshFlags are ssh's options without an argument, sshArgFlags those with
// one (OpenSSH 9).
const (
	sshFlags    = "46AaCfGgKkMNnqsTtVvXxYy"
	sshArgFlags = "BbcDEeFIiJLlmOoPpQRSWw"
	// sshNoShell are the options with which ssh runs no remote shell
	// without a command (-N, -W, -O, -G, -V, -Q).
	sshNoShell = "NWOGVQ"
)

// sshCommand is what the matcher learned from one ssh invocation.
type sshCommand struct {
	// prefix is ssh's words up to the remote command (ssh, options, host).
	prefix []cmdWord
	// remote is the remote command parsed; nil when there is none.
	remote *parsedCommand
	// opaque says why the invocation runs code the matcher cannot see:
	// an option that runs a local command (-o ProxyCommand=..., -F), a
	// remote command that is not literal or nests too deep, or no remote
	// command (the remote shell reads commands from ssh's input).
	opaque string
}

// sshAt returns the index of the ssh that words run: words[0], or a later
// word after a wrapper (sudo ssh, timeout 5 ssh); -1 when there is none.
func sshAt(words []cmdWord) int {
	return commandAt(words, "ssh")
}

// commandAt returns the index of the program named name (a base name)
// that words run: words[0], or a later word after a wrapper; -1 when
// there is none. A program that is name under another name
// (commandAliases) counts.
func commandAt(words []cmdWord, name string) int {
	if words[0].unknown {
		return -1
	}
	base := path.Base(words[0].lit)
	if isCommand(base, name) {
		return 0
	}
	if !isWrapper(base) {
		return -1
	}
	for i := 1; i < len(words); i++ {
		if !words[i].unknown && isCommand(path.Base(words[i].lit), name) {
			return i
		}
	}
	return -1
}

// commandAliases are other names of programs commandAt looks for that
// take the same options (review49b): GNU find and xargs as installed
// beside BSD's (gfind, gxargs), and bfs, a find with find's -exec,
// -execdir, -ok and -okdir.
var commandAliases = map[string]string{"gfind": "find", "bfs": "find", "gxargs": "xargs"}

// isCommand reports whether base (a base name) is the program name or
// one of its commandAliases.
func isCommand(base, name string) bool {
	return base == name || commandAliases[base] == name
}

// parseSSH reads ssh's words (words[0] is ssh) as OpenSSH does: options
// before and after the destination, "--" ending them, the rest the remote
// command. depth is the nesting level of the string words come from.
func parseSSH(words []cmdWord, depth int) sshCommand {
	var sc sshCommand
	host, noShell, ended := false, false, false
	i := 1
	for ; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			sc.opaque = "ssh gets a word that is not literal"
			return sc
		}
		if !ended && w.lit == "--" {
			ended = true
			continue
		}
		if ended || !strings.HasPrefix(w.lit, "-") || w.lit == "-" {
			if host {
				break // the remote command starts here
			}
			host = true
			continue
		}
		for j := 1; j < len(w.lit); j++ {
			c := w.lit[j]
			if strings.IndexByte(sshNoShell, c) >= 0 {
				noShell = true
			}
			if strings.IndexByte(sshFlags, c) >= 0 {
				continue
			}
			if strings.IndexByte(sshArgFlags, c) < 0 {
				sc.opaque = fmt.Sprintf("ssh gets an option it does not have (-%c)", c)
				return sc
			}
			val := w.lit[j+1:]
			if val == "" && i+1 < len(words) {
				i++
				if words[i].unknown {
					sc.opaque = "ssh gets an option value that is not literal"
					return sc
				}
				val = words[i].lit
			}
			if why := sshOptionRuns(c, val); why != "" {
				sc.opaque = why
				return sc
			}
			break
		}
	}
	sc.prefix = words[:i]
	if i == len(words) {
		if host && !noShell {
			sc.opaque = "ssh without a remote command runs a shell that reads commands from its input"
		}
		return sc
	}
	if depth >= maxRemoteDepth {
		sc.opaque = fmt.Sprintf("ssh's remote commands nest deeper than %d levels", maxRemoteDepth)
		return sc
	}
	parts := make([]string, 0, len(words)-i)
	for _, w := range words[i:] {
		parts = append(parts, w.lit) // literal: checked above
	}
	rc := parseCommandDepth(strings.Join(parts, " "), depth+1)
	sc.remote = &rc
	if rc.Opaque != "" {
		sc.opaque = "ssh's remote command: " + rc.Opaque
	}
	return sc
}

// sshOptionRuns says why ssh option -c with value val may run a local
// command the matcher cannot read: -F names a configuration file (which
// may set ProxyCommand), and -o sets ProxyCommand, LocalCommand,
// PermitLocalCommand, RemoteCommand, KnownHostsCommand, Include or Match.
func sshOptionRuns(c byte, val string) string {
	switch c {
	case 'F':
		return "ssh -F reads a configuration file that may run commands"
	case 'o':
		// "Key=Value", "Key Value", "Key\tValue" (ssh_config syntax).
		fields := strings.FieldsFunc(val, func(r rune) bool { return r == '=' || unicode.IsSpace(r) })
		key := ""
		if len(fields) > 0 {
			key = strings.ToLower(fields[0])
		}
		if strings.HasSuffix(key, "command") || key == "include" || key == "match" {
			return fmt.Sprintf("ssh -o %s runs a command the matcher cannot read", key)
		}
	}
	return ""
}

// addSSH records a simple command that runs ssh at words[k]: the words
// join Simple, and so do the remote command's simple commands (for deny
// and approve rules); the remote command's Unsafe makes pc unsafe, and an
// allow rule matches each remote simple command after ssh's words
// (pc.allowed) instead of the words as written.
func (pc *parsedCommand) addSSH(words []cmdWord, k, depth int, unsafe, opaque func(string)) {
	sc := parseSSH(words[k:], depth)
	if sc.opaque != "" {
		opaque(sc.opaque)
	}
	if sc.remote == nil || len(sc.remote.Simple) == 0 {
		pc.appendSimple(words)
		return
	}
	if sc.remote.Unsafe != "" {
		unsafe("ssh's remote command: " + sc.remote.Unsafe)
	}
	if pc.allowed == nil {
		pc.allowed = slices.Clone(pc.Simple)
	}
	pc.Simple = append(pc.Simple, words)
	prefix := words[:k+len(sc.prefix)]
	for _, r := range sc.remote.allowList() {
		pc.allowed = append(pc.allowed, append(slices.Clip(prefix), r...))
	}
	pc.Simple = append(pc.Simple, sc.remote.Simple...)
}

// appendSimple records one simple command for every rule.
func (pc *parsedCommand) appendSimple(words []cmdWord) {
	pc.Simple = append(pc.Simple, words)
	if pc.allowed != nil {
		pc.allowed = append(pc.allowed, words)
	}
}

// allowList returns the simple commands an allow rule matches: Simple,
// with each ssh invocation replaced by its remote simple commands after
// ssh's words.
func (pc *parsedCommand) allowList() [][]cmdWord {
	if pc.allowed != nil {
		return pc.allowed
	}
	return pc.Simple
}
