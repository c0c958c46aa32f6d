package policy

import (
	"path"
	"slices"
	"strings"
)

// Writers whose destination is an operand or a directory rather than an
// output option (branch policy48): uniq IN OUT, xxd IN OUT (xxd -r too),
// split's and csplit's prefix (split -a1 x ~/.bashr writes ~/.bashrc),
// unzip -d DIR and tar -x -C DIR (an archive's entries land there), and a
// C compiler's dependency and map files (-MF FILE, -Wp,-MD,FILE,
// -Wl,-Map=FILE, -Wl,-o,FILE). positionalWrites returns the files each
// writes, a directory an archive unpacks into as DIR/* (any entry: the
// caller checks DIR as a home, .git, .ssh, .config or /etc directory, and
// codeFile the path as one in a guarded directory). An archive unpacked
// elsewhere (tar -xf a.tar in the working directory, holding a Makefile)
// is not read.

// anywhere is what an archive unpacked with its entries' paths kept
// whole (tar -P, unzip -:) writes: entries of / (DIR/* with DIR /).
const anywhere = "/" + "/*"

// positionalWrites returns the files the program name (a base name) with
// words writes through its operands or a directory option; nil for any
// other program.
func positionalWrites(name string, words []cmdWord) []string {
	switch name {
	case "uniq":
		return operandAt(words, 1, "-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars")
	case "xxd":
		return operandAt(words, 1, "-c", "-cols", "-g", "-groupsize", "-l", "-len", "-o", "-offset", "-s", "-seek", "-n", "-name", "-R",
			"--c", "--cols", "--g", "--groupsize", "--l", "--len", "--o", "--offset", "--s", "--seek", "--n", "--name", "--R")
	case "unzip":
		if slices.ContainsFunc(words[1:], func(w cmdWord) bool {
			return strings.HasPrefix(w.lit, "-") && !strings.HasPrefix(w.lit, "--") && strings.Contains(w.lit, ":")
		}) {
			return []string{"//*"} // -: keeps ../ in entry names: anywhere (branch attack48)
		}
		return unzipDirs(words)
	case "cpio", "pax", "patch":
		return append(miscWrites(name, words), archiveFiles(name, words)...)
	case "tar", "gtar", "bsdtar":
		if tarAbsolute(words) {
			return []string{"//*"} // -P: entries keep their absolute names (branch attack48)
		}
		return tarExtractDirs(words)
	case "split", "csplit":
		return splitPrefixes(name, words)
	case "zip", "ar", "jar", "7z", "7za", "7zr", "7zz", "rar":
		return archiveFiles(name, words) // zip ~/.bashrc x (branch policy49)
	}
	if d := decompressed(name, words); d != nil {
		return d
	}
	if gccFamily(name) {
		return gccDepFiles(words)
	}
	return nil
}

// operandAt returns the k-th operand (from 0) of words as a file: the
// words that are no option and no value of one of valued (each taking
// the next word unless its value is attached; a long one, --name, also
// as an abbreviation: longOption), all words after "--".
func operandAt(words []cmdWord, k int, valued ...string) []string {
	n := 0
	opts := true
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		switch {
		case opts && w == "--":
			opts = false
			continue
		case opts && (contains(valued, w) || strings.HasPrefix(w, "--") && !strings.Contains(w, "=") && longOption(w, valued...)):
			i++
			continue
		case opts && strings.HasPrefix(w, "-") && w != "-":
			continue
		}
		if n == k {
			return []string{fileOf(words[i])}
		}
		n++
	}
	return nil
}

// splitPrefixes returns what split or csplit (name) writes, read through
// its prefix (split's second operand, csplit's -f/--prefix; default x
// and xx) and suffix (split's --additional-suffix, csplit's
// -b/--suffix-format, whose %d conversion is dropped): a prefix whose
// base name begins a guarded file's name (.bashr, then the suffix c), is
// empty or names a directory, or a name of prefix, "aa" and the suffix
// that is guarded (xaa.mk), is returned as a guarded file.
func splitPrefixes(name string, words []cmdWord) []string {
	prefix, suffix := "x", ""
	if name == "csplit" {
		prefix = "xx"
	}
	var operands []string
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		opt, val, hasVal := strings.Cut(w, "=")
		switch {
		case strings.HasPrefix(w, "--") && longOption(opt, "--additional-suffix", "--suffix-format"):
			suffix = fileOf(valueWord(words, &i, val, hasVal))
		case name == "csplit" && strings.HasPrefix(w, "--") && longOption(opt, "--prefix"):
			prefix = fileOf(valueWord(words, &i, val, hasVal))
		case strings.HasPrefix(w, "--"):
			if !hasVal && longOption(opt, "--bytes", "--lines", "--line-bytes", "--number", "--suffix-length",
				"--separator", "--filter", "--digits") {
				i++
			}
		case name == "csplit" && (strings.HasPrefix(w, "-b") || strings.HasPrefix(w, "-f")):
			v := fileOf(valueWord(words, &i, w[2:], true))
			if w[1] == 'b' {
				suffix = v
			} else {
				prefix = v
			}
		case strings.HasPrefix(w, "-") && w != "-":
			if len(w) == 2 && strings.IndexByte("abClnt", w[1]) >= 0 {
				i++ // the option's value (split -l 1000, csplit -n 3)
			}
		default:
			operands = append(operands, fileOf(words[i]))
		}
	}
	if name == "split" && len(operands) >= 2 {
		prefix = operands[1]
	}
	if k := strings.IndexByte(suffix, '%'); k >= 0 {
		if e := strings.IndexAny(suffix[k+1:], "diouxX"); e >= 0 {
			suffix = suffix[:k] + "00" + suffix[k+1+e+1:]
		}
	}
	if f := splitPrefixGuarded(prefix); f != "" {
		return []string{f}
	}
	if suffix != "" {
		return []string{prefix + "aa" + suffix}
	}
	return nil
}

// splitCode says why split's words run a command the matcher cannot
// read: --filter=COMMAND (also abbreviated) runs COMMAND with $SHELL -c
// for each piece (review48), or a word that is not literal (an
// expansion may hold --filter).
func splitCode(words []cmdWord) string {
	for _, w := range words[1:] {
		if w.unknown {
			return notLiteral("split")
		}
		if w.lit == "--" {
			return ""
		}
		if opt, _, _ := strings.Cut(w.lit, "="); strings.HasPrefix(opt, "--") && longOption(opt, "--filter") {
			return runsOption("split", "--filter")
		}
	}
	return ""
}

// splitPrefixGuarded returns a guarded file whose name begins with
// prefix, or "": one in the guarded directory the prefix is in
// (.git/hooks/pre-, .git/hooks/), or the guarded name its base name
// begins (~/.bashr: ~/.bashrc; Makefil: Makefile). A prefix that is
// empty or ends in / writes names of suffix letters alone (aa, ab, …),
// which reach no guarded name before millions of files.
func splitPrefixGuarded(prefix string) string {
	switch {
	case codeFile(prefix + "x"):
		return prefix + "x"
	case prefix == "" || strings.HasSuffix(prefix, "/"):
		return ""
	}
	base := strings.ToLower(path.Base(prefix))
	for _, n := range codeFileNames {
		if strings.HasPrefix(strings.ToLower(n), base) {
			return path.Join(path.Dir(prefix), n)
		}
	}
	return ""
}

// unzipDirs returns DIR/* for each directory unzip extracts into: -d
// DIR, also attached (-dDIR) or ending a cluster (-qd DIR), anywhere
// among the words (unzip a.zip -d DIR); and /* with -: (entries' ../
// kept: they land anywhere; review48).
func unzipDirs(words []cmdWord) []string {
	var out []string
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		if strings.HasPrefix(w, "--") || !strings.HasPrefix(w, "-") {
			continue
		}
		k := strings.IndexByte(w, 'd')
		if c := strings.IndexByte(w, ':'); c > 0 && (k < 0 || c < k) {
			out = append(out, anywhere)
		}
		if k > 0 {
			out = append(out, fileOf(valueWord(words, &i, w[k+1:], true))+"/*")
		}
	}
	return out
}

// tarExtractDirs returns DIR/* for each directory tar extracts into
// (-C DIR, -CDIR, --directory[=]DIR, --one-top-level=DIR, C in a
// cluster or an old-style first word), and /* with -P or --absolute-names (entries' leading /
// and .. kept: they land anywhere; review48), when it extracts (-x,
// --extract, --get, x in a cluster or the first word); nil otherwise.
// In a mode that writes the archive (-c, -r, -u, -A, --create,
// --append, --update, --concatenate, --catenate, --delete, c r u A in a
// cluster or the first word) it returns the archive files instead (-f
// FILE, -fFILE, --file[=]FILE; branch policy49): tar -cf ~/.bashrc x
// writes ~/.bashrc as cp x ~/.bashrc does.
func tarExtractDirs(words []cmdWord) []string {
	extract, create := false, false
	var dirs, archives []string
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		opt, val, hasVal := strings.Cut(w, "=")
		switch {
		case w == "--":
			i = len(words)
		case strings.HasPrefix(w, "--"):
			if longOption(opt, "--extract", "--get") {
				extract = true
			}
			create = create || longOption(opt, "--create", "--append", "--update", "--concatenate", "--catenate", "--delete")
			if longOption(opt, "--file") {
				archives = append(archives, fileOf(valueWord(words, &i, val, hasVal)))
			}
			if longOption(opt, "--directory") {
				dirs = append(dirs, fileOf(valueWord(words, &i, val, hasVal))+"/*")
			}
			if longOption(opt, "--absolute-names") {
				dirs = append(dirs, anywhere)
			}
			if longOption(opt, "--one-top-level") && hasVal {
				dirs = append(dirs, val+"/*") // its value is attached only
			}
		case strings.HasPrefix(w, "-") || i == 1:
			// A cluster (-xzf a.tar, -xC dir) or the old style (xfC a.tar
			// dir): a letter that takes a value takes the rest of a dashed
			// word, or the next word in the letters' order.
			letters, old := w, !strings.HasPrefix(w, "-")
			if !old {
				letters = w[1:]
			}
			next := i
			for j := 0; j < len(letters); j++ {
				c := letters[j]
				switch c {
				case 'x':
					extract = true
				case 'c', 'r', 'u', 'A':
					create = true
				case 'P':
					dirs = append(dirs, anywhere)
				}
				if strings.IndexByte("bCfgHKLNTVX", c) < 0 {
					continue
				}
				v := ""
				switch {
				case !old && j+1 < len(letters):
					v = letters[j+1:]
					j = len(letters)
				case next+1 < len(words):
					next++
					v = fileOf(words[next])
				}
				switch c {
				case 'C':
					dirs = append(dirs, v+"/*")
				case 'f':
					archives = append(archives, v)
				}
			}
			i = next
		}
	}
	if create {
		return archives
	}
	if !extract {
		return nil
	}
	return dirs
}

// gccDepFiles returns the dependency and map files a gcc-family command
// writes: -MF FILE (or -MFFILE), -Wp,-MD,FILE and -Wp,-MMD,FILE (and
// -Wp,-MF,FILE), -Wl,-Map=FILE or -Wl,-Map,FILE, -Wl,-o,FILE and
// -Xlinker's -Map=FILE.
func gccDepFiles(words []cmdWord) []string {
	var out []string
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		switch {
		case w == "-MF" || w == "-aux-info": // -aux-info FILE (branch attack48)
			out = append(out, fileOf(valueWord(words, &i, "", false)))
		case strings.HasPrefix(w, "-MF"):
			out = append(out, w[3:])
		case strings.HasPrefix(w, "-Wp,") || strings.HasPrefix(w, "-Wl,"):
			parts := strings.Split(w[4:], ",")
			for k, p := range parts {
				if v, ok := strings.CutPrefix(p, "-Map="); ok {
					out = append(out, v)
				}
				if contains([]string{"-MD", "-MMD", "-MF", "-Map", "-o", "--output"}, p) && k+1 < len(parts) {
					out = append(out, parts[k+1])
				}
				if v, ok := strings.CutPrefix(p, "--output="); ok {
					out = append(out, v)
				}
			}
		case w == "-Xlinker" && i+1 < len(words):
			if v, ok := strings.CutPrefix(words[i+1].lit, "-Map="); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// tarAbsolute reports whether tar's words keep absolute names or let
// entries leave the directory: -P or --absolute-names (alone or in a
// cluster: -xPf, xPf), --one-top-level=DIR (entries land under DIR),
// --transform/--xform/-s (names rewritten; bsdtar's -s), which the
// matcher reads as writing anywhere.
func tarAbsolute(words []cmdWord) bool {
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		opt, _, _ := strings.Cut(w, "=")
		switch {
		case w == "--":
			return false
		case strings.HasPrefix(w, "--"):
			if longOption(opt, "--absolute-names", "--one-top-level", "--transform", "--xform") {
				return true
			}
		case strings.HasPrefix(w, "-") || i == 1:
			letters := strings.TrimPrefix(w, "-")
			for j := 0; j < len(letters); j++ {
				if letters[j] == 'P' || letters[j] == 's' && strings.HasPrefix(w, "-") {
					return true
				}
				if strings.HasPrefix(w, "-") && strings.IndexByte("bCfgHKLNTVX", letters[j]) >= 0 {
					break // the rest is the option's value
				}
			}
		}
	}
	return false
}

// decompressors are programs that write FILE for FILE.gz (and kin)
// given as an operand, unless writing to standard output.
var decompressors = map[string]bool{"gunzip": true, "unxz": true, "unlzma": true, "bunzip2": true, "unzstd": true, "zstdmt": false,
	"unlz4": true, "lunzip": true, "unpigz": true, "brotli": false, "gzip": false, "xz": false, "lzma": false, "bzip2": false,
	"zstd": false, "lz4": false, "lzip": false, "pigz": false, "pbzip2": false, "lbzip2": false, "plzip": false, "uncompress": true,
	"compress": false, "lzop": false}

// decompressed returns the files a decompressor (gunzip, gzip -d, xz -d,
// zstd -d, …: name, words) writes: each operand without its last
// extension (gunzip ~/.bashrc.gz writes ~/.bashrc; branch attack48), the
// operand without a -S/--suffix SUFFIX, the operand itself, and with -r
// each file under a directory operand (DIR/*); with -N/--name (the name
// stored in the file) anywhere.
// nil when it writes to standard output (-c, --stdout, -t, -l); when it
// compresses, compressed's files.
func decompressed(name string, words []cmdWord) []string {
	always, ok := decompressors[name]
	if !ok {
		return nil
	}
	decompress, suffix, anywhere, recursive := always, "", false, false
	var files []string
	opts := true
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		switch {
		case opts && w == "--":
			opts = false
		case opts && strings.HasPrefix(w, "--"):
			opt, val, hasVal := strings.Cut(w, "=")
			switch {
			case longOption(opt, "--decompress", "--uncompress"):
				decompress = true
			case longOption(opt, "--stdout", "--to-stdout", "--test", "--list"):
				return nil
			case longOption(opt, "--suffix"):
				suffix = fileOf(valueWord(words, &i, val, hasVal))
			case longOption(opt, "--name"):
				anywhere = true
			case longOption(opt, "--recursive"):
				recursive = true
			case !hasVal && longOption(opt, "--format", "--threads", "--memlimit", "--memory", "--output"):
				i++
			}
		case opts && strings.HasPrefix(w, "-") && w != "-":
		letters:
			for j := 1; j < len(w); j++ {
				switch w[j] {
				case 'd':
					decompress = true
				case 'c', 't', 'l':
					return nil
				case 'N':
					anywhere = true // the name stored in the file
				case 'r':
					recursive = true
				}
				if w[j] == 'S' {
					suffix = fileOf(valueWord(words, &i, w[j+1:], true))
					break letters
				}
				if strings.IndexByte("FTMo", w[j]) >= 0 {
					if j+1 == len(w) {
						i++
					}
					break letters
				}
			}
		default:
			f := fileOf(words[i])
			files = append(files, f, strings.TrimSuffix(f, path.Ext(f)), f+"/*")
		}
	}
	if !decompress {
		return compressed(name, files, suffix, recursive)
	}
	if anywhere {
		return []string{"//*"} // -N: the name the file stores, anywhere (read as /)
	}
	var out []string
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, "/*") && !recursive: // -r: each file under a directory operand
		case suffix != "" && strings.HasSuffix(f, suffix):
			out = append(out, f, strings.TrimSuffix(f, suffix))
		default:
			out = append(out, f)
		}
	}
	return out
}

// compressed returns the files a compressor (name) writes besides
// OPERAND.gz and its kin (branch policy49): with -S/--suffix SUFFIX each
// operand with SUFFIX appended (gzip -S rc ~/.bash writes ~/.bashrc; with
// -r each file under a directory operand, DIR/*), and lz4's second
// operand (lz4 IN OUT). files holds each operand, it without its
// extension and it with "/*" appended (decompressed's).
func compressed(name string, files []string, suffix string, recursive bool) []string {
	var out []string
	for k := 0; k+2 < len(files); k += 3 {
		f := files[k]
		if suffix != "" {
			out = append(out, f+suffix)
			if recursive {
				out = append(out, f+"/*")
			}
		}
		if name == "lz4" && k == 3 {
			out = append(out, f) // lz4 IN OUT (-m takes every operand as input: read as OUT anyway)
		}
	}
	return out
}
