package policy

import (
	"fmt"
	"strings"
)

// Reports, caches and ini overrides test and lint tools write or read
// (branch attack50). Options the earlier readings missed: jest
// --coverageDirectory and --cacheDirectory, vitest
// --coverage.reportsDirectory (vitest empties it first: .git went) and
// --cache.dir, tsc --generateCpuProfile, golangci-lint v1's
// --out-format FORMAT:PATH, eslint's and prettier's --cache-location;
// each names a file or directory written, read through writtenDirs. And
// pytest -o addopts=… (--override-ini) hands pytest options the matcher
// does not read (--pastebin, --basetemp, -p), so it is opaque.

// reportFilesCode says why words (words[0] is the program, name its base
// name) write a guarded file or directory through a report, cache or
// profile option, or give pytest options through -o addopts; "" when
// they do not. Option names are compared without dashes and case
// (jest's yargs takes --coverage-directory too).
func reportFilesCode(name string, words []cmdWord) string {
	if k := pytestAt(name, words); k > 0 {
		return pytestAddoptsCode(words[k:])
	}
	var files []string
	args := words[1:]
	for i := 0; i < len(args); i++ {
		w := args[i].lit
		if w == "--" {
			break
		}
		opt, val, hasVal := strings.Cut(w, "=")
		if !strings.HasPrefix(opt, "-") {
			continue
		}
		n := strings.ToLower(strings.ReplaceAll(strings.TrimLeft(opt, "-"), "-", ""))
		switch {
		case name == "jest" && (n == "coveragedirectory" || n == "cachedirectory"),
			name == "vitest" && (n == "coverage.reportsdirectory" || n == "cache.dir"):
			files = append(files, fileOf(valueWord(args, &i, val, hasVal))+"/*")
		case name == "tsc" && n == "generatecpuprofile":
			files = append(files, fileOf(valueWord(args, &i, val, hasVal)))
		case name == "golangci-lint" && n == "outformat":
			for _, f := range strings.Split(fileOf(valueWord(args, &i, val, hasVal)), ",") {
				if _, p, ok := strings.Cut(f, ":"); ok {
					files = append(files, p)
				}
			}
		case (name == "eslint" || name == "prettier") && n == "cachelocation":
			v := fileOf(valueWord(args, &i, val, hasVal))
			files = append(files, v, v+"/*")
		}
	}
	return writtenDirs(name, files)
}

// pytestAt returns the index of pytest's first argument in words: 1 for
// pytest or py.test, after "-m pytest" for python; 0 when words do not
// run pytest.
func pytestAt(name string, words []cmdWord) int {
	if name == "pytest" || name == "py.test" {
		return 1
	}
	if versioned(name, "python") {
		for i := 1; i+1 < len(words); i++ {
			if words[i].lit == "-m" && (words[i+1].lit == "pytest" || words[i+1].lit == "py.test") {
				return i + 2
			}
		}
	}
	return 0
}

// pytestAddoptsCode says why pytest's arguments set addopts through -o
// or --override-ini (also attached: -oaddopts=…); "".
func pytestAddoptsCode(args []cmdWord) string {
	for i := 0; i < len(args); i++ {
		w := args[i].lit
		if w == "--" {
			break
		}
		opt, val, hasVal := strings.Cut(w, "=")
		var v string
		switch {
		case w == "-o" || longOption(opt, "--override-ini"):
			v = valueWord(args, &i, val, hasVal).lit
		case strings.HasPrefix(w, "-o") && !strings.HasPrefix(w, "--"):
			v = w[2:]
		default:
			continue
		}
		if key, _, _ := strings.Cut(v, "="); strings.EqualFold(strings.TrimSpace(key), "addopts") {
			return fmt.Sprintf("pytest %s addopts=… sets options the matcher does not read (--pastebin, --basetemp, -p)", opt)
		}
	}
	return ""
}
