package policy

import (
	"path"
	"strings"
)

// go's -C DIR (branch attack50). The go command changes to DIR before
// anything else, so its output options (-o, -coverprofile, -outputdir,
// …) and the binary go build names after the package land under DIR:
// go build -C .git/hooks -o pre-commit ../../evil.go wrote an
// executable hook that the next git commit ran, and the matcher read
// the output as ./pre-commit. Each relative output path is now read
// under DIR, and DIR's own entries as written (go build -C DIR PKG
// writes DIR/PKG's name), so a guarded DIR (.git/hooks, .husky, a bin
// directory on PATH, a home directory) is opaque.

// goChdirCode says why go's words (words[0] is go) write a guarded file
// through -C DIR (also -C=DIR, --C); "" when there is no -C or what it
// writes is not guarded. Any -C counts, also one after a package that
// go run passes to the program (fails closed).
func goChdirCode(words []cmdWord) string {
	dir, ok := goChdir(words)
	if !ok {
		return ""
	}
	files := []string{dir + "/*"}
	for _, f := range append(outputFiles(words), goProfileFiles(words[1:])...) {
		if f == "" || strings.HasPrefix(f, "/") || strings.HasPrefix(f, "~") {
			continue // read as written by writesCode and attack49Code
		}
		entries := strings.HasSuffix(f, "/*")
		j := path.Join(dir, strings.TrimSuffix(f, "/*"))
		if entries {
			j += "/*"
		}
		files = append(files, j)
	}
	return writtenDirs("go -C "+dir, files)
}

// goChdir returns the value of go's -C option in words (words[0] is
// go), and whether there is one; words after "--" are not read.
func goChdir(words []cmdWord) (string, bool) {
	for i := 1; i < len(words); i++ {
		w := words[i].lit
		if w == "--" {
			break
		}
		opt, val, hasVal := strings.Cut(w, "=")
		if opt == "-C" || opt == "--C" {
			return fileOf(valueWord(words, &i, val, hasVal)), true
		}
	}
	return "", false
}
