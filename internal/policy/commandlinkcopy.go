package policy

import (
	"fmt"
	"path"
	"strings"
)

// Links moved or copied into place (branch cmd50b). Making a link to a
// guarded path or outside the working directory is a write to its
// target (commandlinks.go), but a link can also arrive by a move or a
// copy that keeps links as links: mv (always), cp -a, -P, -d,
// --no-dereference, --archive and cp -r/-R (GNU and BSD cp copy a
// tree's links as links unless -L), rsync -l/--links and -a/--archive
// (unless -L/--copy-links, --copy-unsafe-links or --safe-links). The
// matcher cannot see whether a source is a link. One inside the working
// directory was made there (by ln, read when it was made) or checked
// out; one outside it, or a guarded path (a file or directory of
// "Files written now, run later"), may be a link to anywhere (cp -a
// /etc/x . copies a link /etc/x -> /etc/profile.d as one, and a later
// cp evil x/a.sh writes there; rsync -a ~/.ssh/ keys/ likewise). So such
// a move or link-keeping copy whose source lies outside the working
// directory (absolute, ~, climbing out with ..; rsync's host:path) or is
// a guarded path is read as making a link there: opaque. rsync's
// --link-dest, --copy-dest and --compare-dest directories are sources
// too (--link-dest hard-links files from there). A copy that follows
// links (plain cp, cp -L, cp -rL) copies contents and is not read so.

// linkCopyCode says why name (a base name) with words moves or copies
// a possible link from outside the working directory or from a guarded
// path, or "".
func linkCopyCode(name string, words []cmdWord) string {
	var sources []cmdWord
	switch name {
	case "mv", "gmv":
		sources = moveSources(words)
	case "cp", "gcp":
		if !cpKeepsLinks(words) {
			return ""
		}
		sources = moveSources(words)
	case "rsync":
		sources = rsyncLinkSources(words)
	default:
		return ""
	}
	for _, s := range sources {
		if s.unknown {
			continue // an expansion: refused by allow rules already
		}
		p := strings.TrimRight(s.lit, "/")
		if p == "" {
			p = "/"
		}
		if name == "rsync" && rsyncRemote(p) || linkOutside(p) || codeFile(p) || codeDir(p) || aboveCodeDirs(p) {
			return fmt.Sprintf("%s moves or copies %q, outside the working directory or a guarded path, keeping links as links: a link there may lead anywhere, and a later write through it writes there, which the matcher cannot see",
				name, s.lit)
		}
	}
	return ""
}

// moveSources returns the sources of mv's or cp's words: every operand
// with -t DIR, else every operand but the last.
func moveSources(words []cmdWord) []cmdWord {
	ops, _, hasDir, _ := linkOperands(words)
	if hasDir || len(ops) < 2 {
		return ops
	}
	return ops[:len(ops)-1]
}

// cpKeepsLinks reports whether cp's words copy links as links: -P, -d,
// -a, --no-dereference, --archive, or -r/-R/--recursive without -L or
// --dereference (GNU and BSD cp follow no link inside a tree they copy
// unless told to). -L with -P, -d or -a is read as keeping links, as the
// last of them wins and the matcher does not weigh order.
func cpKeepsLinks(words []cmdWord) bool {
	_, _, _, o := linkOperands(words)
	if o.short("Pda") || o.long("--no-dereference", "--archive") {
		return true
	}
	return (o.short("rR") || o.long("--recursive")) && !o.short("L") && !o.long("--dereference")
}

// rsyncValueShorts are rsync's short options that take a value; the
// long ones are rsyncValueLongs (a value attached with = needs no next
// word).
const rsyncValueShorts = "eBfT@M"

var rsyncValueLongs = []string{"--rsh", "--exclude", "--include", "--filter", "--exclude-from", "--include-from",
	"--files-from", "--backup-dir", "--suffix", "--chmod", "--partial-dir", "--temp-dir", "--log-file",
	"--log-file-format", "--password-file", "--out-format", "--bwlimit", "--timeout", "--contimeout", "--max-size",
	"--min-size", "--max-delete", "--port", "--sockopts", "--block-size", "--checksum-choice", "--compress-choice",
	"--compress-level", "--skip-compress", "--modify-window", "--usermap", "--groupmap", "--chown", "--rsync-path",
	"--remote-option", "--info", "--debug", "--iconv", "--outbuf", "--write-batch", "--only-write-batch", "--read-batch",
	"--protocol", "--stop-after", "--stop-at", "--address", "--max-alloc", "--early-input"}

// rsyncLinkSources returns the sources of rsync's words when it keeps
// links (-l, --links, -a, --archive without -L, --copy-links,
// --copy-unsafe-links, --safe-links or a later --no-links): every
// operand but the last, and the --link-dest, --copy-dest and
// --compare-dest directories; nil when it keeps none.
func rsyncLinkSources(words []cmdWord) []cmdWord {
	var ops, dests []cmdWord
	keeps, follows := false, false
	for i := 1; i < len(words); i++ {
		w := words[i]
		opt, val, hasVal := strings.Cut(w.lit, "=")
		switch {
		case w.unknown:
			ops = append(ops, w)
		case w.lit == "--":
			ops = append(ops, words[i+1:]...)
			i = len(words)
		case longOption(opt, "--link-dest", "--copy-dest", "--compare-dest"):
			dests = append(dests, valueWord(words, &i, val, hasVal))
		case longOption(opt, "--links", "--archive"):
			keeps = true
		case longOption(opt, "--copy-links", "--copy-unsafe-links", "--safe-links", "--no-links"):
			follows = true
		case strings.HasPrefix(w.lit, "--"):
			if !hasVal && contains(rsyncValueLongs, opt) {
				i++
			}
		case strings.HasPrefix(w.lit, "-") && w.lit != "-":
			for j := 1; j < len(w.lit); j++ {
				c := w.lit[j]
				keeps = keeps || c == 'l' || c == 'a'
				follows = follows || c == 'L'
				if strings.IndexByte(rsyncValueShorts, c) >= 0 {
					if j == len(w.lit)-1 {
						i++
					}
					break
				}
			}
		default:
			ops = append(ops, w)
		}
	}
	if len(ops) > 1 {
		ops = ops[:len(ops)-1]
	}
	if !keeps || follows {
		return dests
	}
	return append(ops, dests...)
}

// rsyncRemote reports whether p names a remote source: host:path,
// user@host:path, host::module or rsync://.
func rsyncRemote(p string) bool {
	if strings.HasPrefix(p, "rsync://") {
		return true
	}
	host, _, ok := strings.Cut(p, ":")
	return ok && host != "" && !strings.Contains(host, "/")
}

// relocatableLink reports whether a symbolic link whose target text is t,
// stored as written (relative is false) or computed by ln -r against
// the link's directory dir, climbs out with "..": wherever the link is
// later moved (mv d/e/h h, a call the matcher cannot tie to this one),
// it resolves from there, and moved up it leads outside the working
// directory.
func relocatableLink(t, dir string, relative bool) bool {
	if path.IsAbs(t) {
		return false // read by linkOutside
	}
	c := path.Clean(t)
	if relative {
		d := path.Clean(dir)
		return d != "." && c != d && !strings.HasPrefix(c, d+"/")
	}
	return c == ".." || strings.HasPrefix(c, "../")
}
