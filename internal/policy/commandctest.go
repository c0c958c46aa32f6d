package policy

import (
	"fmt"
	"strings"
)

// ctest and ninja running a given program (branch policy49b). ctest
// --build-and-test configures and builds a source tree with a generator
// and make program it is given and then runs --test-command's program
// ("ctest --build-and-test . build --build-generator Ninja
// --test-command rm -rf ~" ran rm; recipe49); its dashboard modes (-D,
// -M, -T and their long forms) run the configure, build, update, memcheck
// and coverage commands of DartConfiguration.tcl or of -D and --overwrite
// settings (MakeCommand=…), -S, -SP and -SR run a CTest script (CMake
// code), and --launch runs the command after it. ninja -t msvc runs the
// command after "--". Each is opaque: deny and approve rules match it, an
// allow rule never allows it. Running a build directory's tests (ctest
// --test-dir build, -R, -L, -j, --output-on-failure) is read as before:
// CTestTestfile.cmake is a build file whose writes are guarded.

// ctestNinjaCode says why ctest's or ninja's words (name is the base
// name) run a program or script the matcher cannot read, or "".
func ctestNinjaCode(name string, words []cmdWord) string {
	switch name {
	case "ctest":
		return ctestCode(words)
	case "ninja", "ninja-build", "samu":
		return ninjaCode(words)
	}
	return ""
}

// ctestCode says why ctest's words run a program, a command line or a
// script: an option of ctestRuns (also as the start of a word: -DExperimental,
// -SPscript.cmake, --build-and-test's --build-* options), a word that is
// not literal, or -O/--output-log naming a file a program runs as code.
func ctestCode(words []cmdWord) string {
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral("ctest")
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		if w.lit == "--" {
			return "" // the test program's options (ctest 4: -- ARGS)
		}
		if opt == "--build-config" {
			if !hasVal {
				i++ // -C's long form, not a --build-and-test option
			}
			continue
		}
		for _, p := range []string{"-D", "-M", "-T", "-S", "--build-", "--test-command", "--dashboard", "--test-action",
			"--test-model", "--script", "--overwrite", "--launch", "--extra-submit"} {
			if strings.HasPrefix(opt, p) {
				return fmt.Sprintf("ctest %s runs a program, a command line or a CTest script the matcher cannot read", opt)
			}
		}
		if opt == "-O" || opt == "--output-log" || opt == "--output-junit" {
			if v := fileOf(valueWord(words, &i, val, hasVal)); codeFile(v) {
				return writesFile("ctest", v)
			}
		}
	}
	return ""
}

// ninjaCode says why ninja's words run a command: -t msvc (its -- command)
// in any form getopt reads (-t msvc, -tmsvc, -nt msvc), or a word that is
// not literal. Of ninja's short options C, f, j, k, l, d, t and w take a
// value.
func ninjaCode(words []cmdWord) string {
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral("ninja")
		}
		if w.lit == "--" {
			return ""
		}
		if !strings.HasPrefix(w.lit, "-") || strings.HasPrefix(w.lit, "--") {
			continue
		}
		for j := 1; j < len(w.lit); j++ {
			c := w.lit[j]
			if strings.IndexByte("Cfjkldtw", c) < 0 {
				continue
			}
			v := valueWord(words, &i, w.lit[j+1:], true)
			if c == 't' && (v.unknown || v.lit == "msvc") {
				return `ninja -t msvc runs the command after "--", which the matcher does not read`
			}
			break
		}
	}
	return ""
}
