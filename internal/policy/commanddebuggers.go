package policy

import (
	"fmt"
	"strings"
)

// debuggerSafe lists the gdb and lldb commands given inline that run
// nothing and write nothing: backtraces and listings. Any other (shell,
// !, pipe, python, run, call system(…), print f(…), source, …) may run a
// command, also in the program debugged.
var debuggerSafe = []string{"bt", "bt full", "backtrace", "backtrace full", "where", "thread apply all bt",
	"thread apply all bt full", "thread apply all backtrace", "info registers", "info threads", "info sharedlibrary",
	"info frame", "quit", "q", "bt all", "thread backtrace", "thread backtrace all", "register read", "image list", "thread list"}

// debuggerFlags lists the options of gdb and lldb that take no value
// (without their dashes). An option outside it, or outside the inline and
// file lists of debuggerCode, may take the next word as its value: lldb's
// -l/--script-language, -n/--attach-name, -p, -c, -f, -a, -R (LLVM's
// OptTable gives a Separate option the next word whatever it looks like),
// gdb's -p/--pid, -b (baud rate), -d, -cd, -tty, -s, -e, -i, -D
// (getopt_long_only alike). So "lldb -l -b ./a" is not in batch mode: -b
// is the script language, and lldb reads commands from its input.
var debuggerFlags = map[string][]string{
	"gdb": {"batch", "batch-silent", "q", "quiet", "silent", "nx", "n", "nh", "readnow", "readnever", "return-child-result",
		"write", "statistics", "tui", "version", "help", "nw", "nowindows", "w", "windows", "fullname", "f", "dbx", "configuration"},
	"lldb": {"batch", "b", "wait-for", "w", "python-path", "P", "print-script-interpreter-info", "repl", "r", "no-lldbinit", "x",
		"local-lldbinit", "source-quietly", "Q", "version", "v", "help", "h", "editor", "e", "no-use-colors", "X", "debug", "d"},
}

// debuggerCode says why gdb or lldb (name) runs debugger commands the
// matcher cannot read: one given inline (gdb -ex, -iex, --eval-command;
// lldb -o, -O, -k) outside debuggerSafe, a command file read from input,
// or no batch mode (the debugger then reads commands from its input,
// where "shell rm x" runs one). A command file (-x file, lldb -s file) is
// not read. -batch, --version and --help count only where they cannot be
// the value of the option before them (debuggerFlags); every word is
// still read as an option, whatever came before it.
func debuggerCode(name string, words []cmdWord) string {
	inline := []string{"ex", "iex", "eiex", "eval-command", "init-eval-command", "early-init-eval-command"}
	files := []string{"x", "ix", "eix", "command", "init-command", "early-init-command"}
	batch := []string{"batch", "batch-silent"}
	if name == "lldb" {
		inline = []string{"o", "one-line", "O", "one-line-before-file", "k", "one-line-on-crash"}
		files = []string{"s", "source", "S", "source-before-file", "K", "source-on-crash"}
		batch = []string{"b", "batch"}
	}
	// gdb reads its options with getopt_long_only: -ev, --eval-c and
	// -init-e are abbreviations of eval-command and init-eval-command.
	// Its table is not read here, so any prefix of such a name counts
	// but the exact names -e (exec), -i (interpreter) and -c (core).
	// lldb (LLVM's option table) takes no abbreviation: an option is its
	// exact name, else an error.
	is := func(opt string, list []string) bool {
		return contains(list, opt) || name == "gdb" && !contains([]string{"e", "i", "c"}, opt) && longPrefix(opt, list...)
	}
	exits, batched := false, false
	counts := true // whether a word here is an option, not the value of the one before
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral(name)
		}
		if !strings.HasPrefix(w.lit, "-") || w.lit == "-" {
			counts = true
			continue
		}
		opt, val, hasVal := strings.Cut(strings.TrimLeft(w.lit, "-"), "=")
		here := counts
		counts = hasVal || contains(debuggerFlags[name], opt)
		switch {
		case w.lit == "--" || opt == "args":
			i = len(words) // the program to debug and its arguments
		case is(opt, inline):
			v, ok := optionValue(words, &i, val, hasVal)
			if !ok || !contains(debuggerSafe, strings.Join(strings.Fields(v), " ")) {
				return runsOption(name, w.lit)
			}
			counts = true
		case is(opt, files):
			v, ok := optionValue(words, &i, val, hasVal)
			if why := scriptFile(name, cmdWord{lit: v, unknown: !ok}); why != "" {
				return why
			}
			counts = true
		case !here:
		case contains(batch, opt):
			batched = true
		case contains([]string{"version", "help", "v", "h"}, opt):
			exits = true
		}
	}
	if batched || exits {
		return ""
	}
	return fmt.Sprintf("%q reads debugger commands from its input, which the matcher cannot read", name)
}
