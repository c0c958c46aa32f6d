package policy

import (
	"fmt"
	"strings"
)

// curlOptionsCode says why curl's words (name is curl) hold options the
// matcher cannot read: -K/--config reading a file or its input (-K -,
// -sK-, -K opts.txt; branch policy47: a file too), whose lines may set
// output = ~/.bashrc or the URL; -w/--write-out @FILE or @- (the format,
// %output{FILE} among it, read from a file or the input) or a format that
// is not literal; an --expand-X option (curl 8.3
// and later) whose value curl builds from its --variable values
// ('{{f:64dec}}' spells .git/hooks/pre-commit in base64), but for the
// options in curlExpandSafe; or a file name the command does not spell:
// -O with --expand-url, -J (the server's Content-Disposition names it),
// or a URL glob with -O or an -o holding #N (curl -O 'https://x/{.bashrc,a}',
// -o '#1'), unless -g/--globoff (and no --next, after which -g no longer
// holds).
func curlOptionsCode(name string, words []cmdWord) string {
	if name != "curl" {
		return ""
	}
	expandURL, remote, headerName, glob, hashOut, globOff, next := false, false, false, false, false, false, false
	for i := 1; i < len(words); i++ {
		w := words[i]
		opt, val, hasVal := strings.Cut(w.lit, "=")
		var config, format, out cmdWord
		switch {
		case w.lit == "--":
			// The rest are URLs.
			for _, u := range words[i+1:] {
				glob = glob || strings.ContainsAny(fileOf(u), "{[")
			}
			i = len(words)
			continue
		case strings.HasPrefix(w.lit, "--expand-"):
			x := strings.TrimPrefix(opt, "--expand-")
			if x == "url" {
				expandURL = true
			} else if !contains(curlExpandSafe, x) {
				return fmt.Sprintf("curl %s builds an option's value from curl's variables, which the matcher cannot read", opt)
			}
			continue
		case strings.HasPrefix(w.lit, "--"):
			switch {
			case longOption(opt, "--remote-name", "--remote-name-all"):
				remote = true
			case longOption(opt, "--remote-header-name"):
				headerName = true
			case opt == "--globoff":
				globOff = true
			case longOption(opt, "--next"):
				next = true // -g counts only up to it: not read per part
			case longOption(opt, "--config"):
				config = valueWord(words, &i, val, hasVal)
			case longOption(opt, "--url"):
				// curl 8.13 and later read URLs from the file after '@'
				// (--url @FILE, one a line): with -O their last parts
				// name the files written, which the matcher cannot read.
				if u := valueWord(words, &i, val, hasVal); u.unknown || strings.HasPrefix(u.lit, "@") {
					return "curl --url @FILE reads URLs (whose names -O writes) from a file the matcher cannot read"
				}
			case longOption(opt, "--write-out"):
				format = valueWord(words, &i, val, hasVal)
			case longOption(opt, "--output"):
				out = valueWord(words, &i, val, hasVal)
			}
		case strings.HasPrefix(w.lit, "-"):
			// The first of K, w and o in a cluster takes the rest of the
			// word (or the next word); a letter before it that takes a
			// value would make it that value, read here as K, w or o
			// (fails closed). O and J count anywhere, g only before the
			// first letter that takes a value.
			remote = remote || strings.Contains(w.lit, "O")
			headerName = headerName || strings.Contains(w.lit, "J")
			flags := w.lit[1:]
			if v := strings.IndexAny(flags, curlValueLetters); v >= 0 {
				flags = flags[:v]
			}
			globOff = globOff || strings.Contains(flags, "g")
			next = next || strings.Contains(flags, ":")
			switch k := 1 + strings.IndexAny(w.lit[1:], "Kwo"); {
			case k == 0:
			case w.lit[k] == 'K':
				config = valueWord(words, &i, w.lit[k+1:], true)
			case w.lit[k] == 'w':
				format = valueWord(words, &i, w.lit[k+1:], true)
			default:
				out = valueWord(words, &i, w.lit[k+1:], true)
			}
		default:
			glob = glob || strings.ContainsAny(fileOf(w), "{[")
			continue
		}
		hashOut = hashOut || strings.Contains(fileOf(out), "#")
		if config.unknown || config.lit != "" {
			return "curl -K reads options from a file or its input (output = FILE, url = … among them), which the matcher cannot read"
		}
		if format.unknown {
			return "curl -w gets a format that is not literal (%output{FILE} may be among it)"
		}
		if strings.HasPrefix(format.lit, "@") {
			return "curl -w @FILE reads its format from a file or its input (%output{FILE} among it), which the matcher cannot read"
		}
	}
	switch {
	case remote && expandURL:
		return "curl --expand-url with -O names the file by curl's variables, which the matcher cannot read"
	case remote && headerName:
		return "curl -J writes the file the server names, which the matcher cannot read"
	case glob && (!globOff || next) && (remote || hashOut):
		return "curl's URL glob names the files it writes, which the matcher cannot read"
	}
	return ""
}

// curlValueLetters are curl's short options that take a value: in a
// cluster (-sSfLo FILE) the first of them takes the rest of the word, or
// the next word.
const curlValueLetters = "AbcCdDeEFHKmoPQrtTuUwxXyYz"

// cutFold is strings.Cut with sep, ASCII text, matched without case.
func cutFold(s, sep string) (before, after string, found bool) {
	for i := 0; i+len(sep) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sep)], sep) {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// curlExpandSafe are the options whose --expand- form curl may build from
// its variables without naming a file it writes (curl 8.3's
// --expand-header 'Authorization: Bearer {{TOKEN}}'). Every other
// option's may (--expand-dump-header, --expand-write-out with
// %output{FILE}, --expand-cookie-jar, …), and the list fails closed.
var curlExpandSafe = []string{"header", "proxy-header", "data", "data-ascii", "data-binary", "data-raw", "data-urlencode", "json",
	"form-string", "user", "proxy-user", "oauth2-bearer", "user-agent", "referer", "request", "cookie", "url-query"}

// curlFiles returns the files curl writes besides what it downloads:
// -D/--dump-header, --trace, --trace-ascii, --stderr, -c/--cookie-jar,
// --libcurl, --etag-save, --hsts, --alt-svc, and -w's %output{FILE}
// (%output{>>FILE} appends). Their text is partly the server's (a header
// name may hold backquotes, a cookie value $(…)), so a startup file
// named there runs it.
func curlFiles(words []cmdWord) []string {
	var files []string
	for i := 1; i < len(words); i++ {
		w := words[i]
		opt, val, hasVal := strings.Cut(w.lit, "=")
		var v cmdWord
		switch {
		case w.lit == "--":
			return files
		case strings.HasPrefix(w.lit, "--"):
			switch {
			case longOption(opt, "--dump-header", "--trace", "--trace-ascii", "--stderr", "--cookie-jar", "--libcurl", "--etag-save",
				"--hsts", "--alt-svc"):
				files = append(files, fileOf(valueWord(words, &i, val, hasVal)))
			case longOption(opt, "--write-out"):
				v = valueWord(words, &i, val, hasVal)
			}
		case strings.HasPrefix(w.lit, "-"):
			// The first of D, c and w in a cluster takes the rest of the
			// word: -sw'%output{.bashrc}' is -w, whatever letters its
			// value holds.
			switch k := 1 + strings.IndexAny(w.lit[1:], "Dcw"); {
			case k == 0:
			case w.lit[k] == 'w':
				v = valueWord(words, &i, w.lit[k+1:], true)
			default:
				files = append(files, fileOf(valueWord(words, &i, w.lit[k+1:], true)))
			}
		}
		// Read without case (fails closed if curl's is exact).
		for rest := fileOf(v); ; {
			_, after, ok := cutFold(rest, "%output{")
			if !ok {
				break
			}
			f, _, _ := strings.Cut(after, "}")
			files = append(files, strings.TrimPrefix(f, ">>"))
			rest = after
		}
	}
	return files
}

// wgetValueLetters are wget's short options that take a value (getopt: the
// first of them in a cluster takes the rest of the word, or the next
// word); -n takes its letters as its value (-nv, -nH, -np).
const wgetValueLetters = "eoaiBtOTwQlARDIXPUnY"

// wgetCode says why wget's words write a file the matcher cannot name or
// run what it cannot read, and returns the files it writes besides its
// downloads (downloadFiles): the log of -o/--output-file and
// -a/--append-output (it quotes the server's Location header),
// --save-cookies, --rejected-log and --hsts-file, and --default-page (the
// name of a URL ending in /). Opaque: -e/--execute
// (a .wgetrc command: output_document = ~/.bashrc) but for proxy and
// robots settings, --config or -i/--input-file (a file or the input;
// branch policy47: a file too, whose URLs name the files), and the
// options with which the server names the files: -r, -m, -p, -x and
// their long forms, --content-disposition, --trust-server-names.
// --use-askpass runs a command.
func wgetCode(words []cmdWord) (string, []string) {
	var files []string
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.lit == "--" {
			break
		}
		if !strings.HasPrefix(w.lit, "-") || w.lit == "-" {
			continue
		}
		var kind byte
		var v cmdWord
		if opt, val, hasVal := strings.Cut(w.lit, "="); strings.HasPrefix(w.lit, "--") {
			switch {
			case longOption(opt, "--recursive", "--mirror", "--page-requisites", "--force-directories", "--content-disposition",
				"--trust-server-names"):
				return fmt.Sprintf("wget %s writes files the server names, which the matcher cannot read", opt), nil
			case longOption(opt, "--use-askpass"):
				return "wget --use-askpass runs a command the matcher cannot read", nil
			case longOption(opt, "--execute"):
				kind = 'e'
			case longOption(opt, "--output-file", "--append-output", "--save-cookies", "--rejected-log", "--hsts-file",
				"--default-page"):
				kind = 'o'
			case longOption(opt, "--input-metalink", "--metalink-over-http", "--metalink-index"):
				// A metalink file or the server's metalink headers name
				// the files written.
				return fmt.Sprintf("wget %s writes files a metalink names, which the matcher cannot read", opt), nil
			case longOption(opt, "--input-file", "--config"):
				kind = 'i'
			default:
				continue
			}
			v = valueWord(words, &i, val, hasVal)
		} else {
			flags, k := w.lit[1:], 1+strings.IndexAny(w.lit[1:], wgetValueLetters)
			if k > 0 {
				flags = w.lit[1:k]
			}
			if j := strings.IndexAny(flags, "rmpx"); j >= 0 {
				return fmt.Sprintf("wget -%c writes files the server names, which the matcher cannot read", flags[j]), nil
			}
			if k == 0 || strings.IndexByte("eoai", w.lit[k]) < 0 {
				continue
			}
			kind = w.lit[k]
			if kind == 'a' {
				kind = 'o' // -a appends to the log
			}
			v = valueWord(words, &i, w.lit[k+1:], true)
		}
		switch kind {
		case 'e':
			if v.unknown || !wgetCommandSafe(v.lit) {
				return "wget -e runs a .wgetrc command (output_document = FILE among them) the matcher does not read", nil
			}
		case 'o':
			files = append(files, fileOf(v))
		case 'i':
			// wget -i FILE and --config=FILE: URLs (whose names become the
			// files written) or .wgetrc commands from a file or the input.
			if v.unknown || v.lit != "" {
				return "wget -i or --config reads URLs or .wgetrc commands from a file or its input, which the matcher cannot read", nil
			}
		}
	}
	return "", files
}

// wgetCommandSafe reports whether the .wgetrc command cmd (wget -e cmd)
// names no file: robots and proxy settings. wget ignores case, '_' and '-'
// in a command's name.
func wgetCommandSafe(cmd string) bool {
	name, _, _ := strings.Cut(cmd, "=")
	name = strings.NewReplacer("_", "", "-", "", " ", "", "\t", "").Replace(strings.ToLower(name))
	return strings.Contains(cmd, "=") && !strings.ContainsAny(cmd, "\n\r") && contains([]string{"robots", "httpproxy", "httpsproxy", "ftpproxy", "noproxy", "useproxy"}, name)
}
