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
// gfortran, gccgo, and clang and clang++ (which take them too), with a version suffix (gcc-12) or a target prefix
// (x86_64-linux-gnu-gcc).
func gccFamily(name string) bool {
	if i := strings.LastIndexByte(name, '-'); i > 0 && strings.Trim(name[i+1:], "0123456789.") == "" {
		name = name[:i] // gcc-12
	}
	if i := strings.LastIndexByte(name, '-'); i >= 0 {
		name = name[i+1:] // x86_64-linux-gnu-gcc
	}
	return contains([]string{"cc", "c++", "gcc", "g++", "gfortran", "gccgo", "clang", "clang++"}, name)
}

// gccCode says why a gcc-family command's words run a program the
// matcher cannot read (gccProgramOption, and -Xlinker before a word that
// names a linker plugin), or a word that is not literal.
func gccCode(name string, words []cmdWord) string {
	for i, w := range words[1:] {
		if w.unknown {
			return notLiteral(name)
		}
		if why := gccProgramOption(w.lit); why != "" {
			return name + " " + why
		}
		if w.lit == "-Xlinker" && i+2 < len(words) && strings.Contains(words[i+2].lit, "plugin") {
			return name + " -Xlinker " + words[i+2].lit + " makes the linker load a plugin the matcher cannot read"
		}
	}
	return ""
}

// gccProgramOption says why one option word of a gcc or clang driver (a
// word of its command line, or a field of CGO_*FLAGS) makes it run or
// load a program the matcher cannot read, or "": -wrapper (runs every
// subprogram under the program it names), -B (cc1, as and ld from a
// directory), -fplugin, -fpass-plugin, -Xclang (-load), -specs (a specs
// file can name the programs to run), --ld-path and a -fuse-ld= path
// (the linker), -Wl, or -Wa, naming a plugin (ld -plugin), and an @FILE
// response file (more options, any of these among them). Any number of
// leading dashes, value attached or not (branch attack47; the -B,
// plugin, specs and linker options in the review after it).
func gccProgramOption(w string) string {
	if !strings.HasPrefix(w, "-") {
		if strings.HasPrefix(w, "@") {
			return w + " reads options (-wrapper among them) from a file the matcher cannot read"
		}
		return ""
	}
	opt := "-" + strings.TrimLeft(w, "-")
	switch {
	case strings.HasPrefix(opt, "-wrapper"):
		return "-wrapper runs a program the matcher cannot read"
	case hasAnyPrefix(opt, "-B", "-fplugin", "-fpass-plugin", "-Xclang", "-specs", "-ld-path"),
		strings.HasPrefix(opt, "-fuse-ld=") && strings.ContainsRune(opt, '/'),
		hasAnyPrefix(opt, "-Wl,", "-Wa,") && strings.Contains(opt, "plugin"):
		return w + " makes the compiler run or load a program the matcher cannot read"
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
// -O, -g, -I, -D, -U, -L, -l, -W (but -Wp,), -f, -m, -std=, -isystem,
// -pthread, -static, -shared, -s, -rdynamic or -framework, and none that
// gccProgramOption names (-fplugin, -Wl,-plugin, -fuse-ld=/path, @FILE).
// -wrapper, -B, -specs= and quoted words are not.
func cgoFlagsSafe(val string) bool {
	for _, f := range strings.Fields(val) {
		switch {
		case gccProgramOption(f) != "":
			return false // -fplugin=x.so, -Wl,-plugin=x.so, -fuse-ld=/x: allowed prefixes below
		case strings.ContainsAny(f, `'"\`):
			return false // go splits the value with quotes (cmd/internal/quoted)
		case !strings.HasPrefix(f, "-"): // an operand (@FILE is refused above)
		case strings.HasPrefix(f, "-Wp,"):
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
