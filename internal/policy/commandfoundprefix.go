package policy

import (
	"path"
	"strings"
)

// Found names with a suffix (branch attack50). find's name filters
// (commandfindnames.go) read a found file as START/x.EXT, right for a
// word that is {} alone, since no guarded name ends with .EXT. A word
// {}SUFFIX names P.EXTSUFFIX for whatever P the found file has, and some
// guarded names are known by their beginning and ending: tsconfig.go.json
// (a TypeScript project tsc -p accepts, commandtsc.go) from a found
// tsconfig.go, and jsconfig.go.json. So where a word adds a suffix, the
// found path is also read with those beginnings. makefile.* and
// .psqlrc-* are guarded too, but no program reads makefile.go.orig or
// .psqlrc-x.go.orig, and reading them would refuse every {}.orig.

// guardedPrefixes are beginnings of base names codeFile guards with
// tsConfigFile's .json ending.
var guardedPrefixes = []string{"tsconfig.", "jsconfig."}

// prefixedFound returns, when a word of words holding repl adds a suffix
// after it, found with each path's base name given each of
// guardedPrefixes (START/x.go as START/tsconfig.go, …); else nil.
func prefixedFound(words []cmdWord, repl string, found []string) []string {
	suffixed := false
	for _, w := range words {
		if k := strings.Index(w.lit, repl); k >= 0 && len(w.lit) > k+len(repl) {
			suffixed = true
		}
	}
	if !suffixed {
		return nil
	}
	var out []string
	for _, f := range found {
		dir, base := path.Split(f)
		ext := strings.TrimPrefix(path.Ext(base), ".")
		for _, p := range guardedPrefixes {
			out = append(out, dir+p+ext)
		}
	}
	return out
}
