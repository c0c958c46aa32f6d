package policy

import (
	"strings"
)

// C compilers (branch attack47). gcc's -wrapper runs every subprogram
// (cc1, as, collect2) under a program the option names with its
// arguments: gcc -wrapper 'sh,-c,rm -rf ~' -c a.c runs that shell
// command; an @FILE word reads more options, -wrapper among them, from a
// file the matcher cannot read. cgo hands CGO_CFLAGS and kin to that
// compiler unchecked (go's allow list covers #cgo lines only), so
// CGO_CFLAGS="-wrapper 'sh,-c,rm x'" go build runs the command too.

// gccFamily reports whether name (a program's base name in lower case)
// is gcc or a driver that takes its options: cc, c++, gcc, g++,
// gfortran, gccgo, with a version suffix (gcc-12) or a target prefix
// (x86_64-linux-gnu-gcc).
func gccFamily(name string) bool {
	if i := strings.LastIndexByte(name, '-'); i > 0 && strings.Trim(name[i+1:], "0123456789.") == "" {
		name = name[:i] // gcc-12
	}
	if i := strings.LastIndexByte(name, '-'); i >= 0 {
		name = name[i+1:] // x86_64-linux-gnu-gcc
	}
	return contains([]string{"cc", "c++", "gcc", "g++", "gfortran", "gccgo"}, name)
}

// gccCode says why a gcc-family command's words run a program the
// matcher cannot read: -wrapper (any number of dashes, attached value
// or not) or an @FILE response file; or a word that is not literal.
func gccCode(name string, words []cmdWord) string {
	for _, w := range words[1:] {
		switch {
		case w.unknown:
			return notLiteral(name)
		case strings.HasPrefix(w.lit, "@"):
			return name + " " + w.lit + " reads options (-wrapper among them) from a file the matcher cannot read"
		case strings.HasPrefix(w.lit, "-") && strings.HasPrefix(strings.TrimLeft(w.lit, "-"), "wrapper"):
			return name + " -wrapper runs a program the matcher cannot read"
		}
	}
	return ""
}

// cgoFlagVar reports whether name is a variable whose value cgo passes
// to the C, C++ or Fortran compiler or the linker as flags.
func cgoFlagVar(name string) bool {
	return contains([]string{"CGO_CFLAGS", "CGO_CPPFLAGS", "CGO_CXXFLAGS", "CGO_FFLAGS", "CGO_LDFLAGS"}, name)
}

// cgoFlagsSafe reports whether a CGO_*FLAGS value holds only flags that
// run no program: each field is an operand (a directory, a library, a
// macro's value: no leading '-', '@' or a quote) or an option starting
// -O, -g, -I, -D, -U, -L, -l, -W (but -Wp,), -f (but -fplugin), -m,
// -std=, -isystem, -pthread, -static, -shared, -s, -rdynamic or
// -framework. -wrapper, -B, -specs=, @FILE and quoted words are not.
func cgoFlagsSafe(val string) bool {
	for _, f := range strings.Fields(val) {
		switch {
		case strings.ContainsAny(f, `'"\`):
			return false // go splits the value with quotes (cmd/internal/quoted)
		case !strings.HasPrefix(f, "-"):
			if strings.HasPrefix(f, "@") {
				return false
			}
		case strings.HasPrefix(f, "-Wp,"), strings.HasPrefix(f, "-fplugin"):
			return false
		case contains([]string{"-pthread", "-static", "-shared", "-s", "-rdynamic", "-framework", "-isystem"}, f):
		case !hasAnyPrefix(f, "-O", "-g", "-I", "-D", "-U", "-L", "-l", "-W", "-f", "-m", "-std="):
			return false
		}
	}
	return true
}

// hasAnyPrefix reports whether s starts with one of prefixes.
func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
