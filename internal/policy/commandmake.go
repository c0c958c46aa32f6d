package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// makeProgramVars are the variables GNU make's built-in rules run as
// programs (AR, CC, RM, …), MAKE and INSTALL, which makefiles run in
// recipes, and MAKESHELL, the shell of GNU make on Windows and MS-DOS
// (review48b): a command-line value of one is the program a recipe runs.
var makeProgramVars = []string{"MAKESHELL", "AR", "AS", "CC", "CXX", "CPP", "FC", "M2C", "PC", "CO", "GET", "LEX", "YACC", "LINT",
	"MAKEINFO", "TEX", "TEXI2DVI", "WEAVE", "CWEAVE", "TANGLE", "CTANGLE", "RM", "LD", "MAKE", "INSTALL", "OBJCOPY",
	"STRIP", "RANLIB", "NM", "PYTHON", "PERL", "SH"}

// addMakeVars reads make's command-line variables (words[0] is make)
// as what they are besides makefile variables (branch attack48). GNU
// make exports a command-line variable whose name is letters, digits and
// underscores to every recipe's environment, so make PATH=/tmp/x,
// make LD_PRELOAD=./x.so or make GIT_DIR=x is that assignment before
// the recipe's commands: judged as a prefix assignment is (setEnv;
// searchVar makes it unsafe). A recipe runs the value of a program
// variable ($(CC) -c a.c, $(RM) out): make CC=rm CFLAGS=-rf runs rm -rf;
// such a value, or one naming a shell, an interpreter or a wrapper
// (make X=python3 Y=x.py), is parsed as a command (addEmbedded: an allow
// rule must match it too). Any other one-word value is matched by deny
// and approve rules as a command of that name (a makefile may run
// $(TOOL)), not by allow rules (make PREFIX=/usr/local stays allowed).
// A compiler option that runs a program or writes a guarded file, and a
// guarded file, are opaque (makeValueCode). makeCode already makes a
// value that is not one plain word opaque.
func (pc *parsedCommand) addMakeVars(words []cmdWord, depth int, unsafe, opaque func(string)) {
	for _, w := range words[1:] {
		if w.unknown {
			continue // makeCode makes make with such a word opaque
		}
		name, val, ok := strings.Cut(w.lit, "=")
		if !ok || strings.HasPrefix(name, "-") {
			continue
		}
		name = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(name), ":+?!"))
		up := strings.ToUpper(name)
		if searchVar(up) {
			unsafe(fmt.Sprintf("make exports %s to its recipes, which changes the programs they run", name))
		}
		kind := envVar(name)
		pc.setEnv(name, val, true, depth, unsafe, opaque)
		if why := makeValueCode(name, val); why != "" {
			opaque(why)
			continue
		}
		if val == "" || strings.HasPrefix(val, "-") || kind == envCommand {
			continue
		}
		prog := programName(path.Base(val))
		if contains(makeProgramVars, up) || isShellLike(prog) || isWrapper(prog) || interpreterFor(prog) != nil ||
			interpreterFor(path.Base(val)) != nil {
			pc.addEmbedded(val, depth, "make variable "+name, unsafe, opaque)
			continue
		}
		if pc.allowed == nil {
			pc.allowed = slices.Clone(pc.Simple)
		}
		pc.Simple = append(pc.Simple, []cmdWord{{lit: val}})
	}
}

// makeValueCode says why the make command-line variable name's value
// val runs or writes what the matcher cannot read: a compiler option
// that runs a program or writes a file (make CFLAGS=-wrapper
// CPPFLAGS=sh,-c,rm runs rm for $(CC) $(CFLAGS) $(CPPFLAGS) -c a.c;
// LDFLAGS=-Wl,-o,.git/hooks/pre-commit writes a hook): an option
// cgoFlagsSafe refuses, or one writing a guarded file; or a guarded file
// itself (make OUT=.git/hooks/pre-commit, for a recipe's -o $(OUT)).
func makeValueCode(name, val string) string {
	if strings.HasPrefix(val, "-") && !cgoFlagsSafe(val) {
		return fmt.Sprintf("make variable %s holds a compiler option that may run a program", name)
	}
	files := gccDepFiles([]cmdWord{{lit: "cc"}, {lit: val}})
	if codeFile(val) {
		files = append(files, val)
	}
	for _, f := range files {
		if codeFile(f) {
			return fmt.Sprintf("make variable %s names %q, which a recipe may write", name, f)
		}
	}
	return ""
}

// makeAt returns the index of make (or gmake, in any case, with .exe)
// in words: 0, or after a wrapper (sudo make, env make); -1 if none.
func makeAt(words []cmdWord) int {
	for i, w := range words {
		if w.unknown {
			return -1
		}
		name := programName(path.Base(w.lit))
		if name == "make" || name == "gmake" {
			return i
		}
		if i == 0 && !isWrapper(name) {
			return -1
		}
	}
	return -1
}
