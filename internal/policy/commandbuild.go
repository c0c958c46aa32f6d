package policy

import (
	"fmt"
	"strings"
)

// Build tools besides make (branch attack48). Like make, each runs the
// commands of a build file (CMakeLists.txt, meson.build, build.ninja,
// Bazel's BUILD files and .bazelrc, Gradle's and Maven's build files, a
// Rakefile, a justfile, a Taskfile, tox.ini, noxfile.py, pre-commit's
// configuration) that the matcher cannot read: a write to one is opaque
// (codeFile), and so is an option that makes the tool run a file by
// another name, a program or a command line:
//
//   - just -f/--justfile, task -t/--taskfile, rake -f/--rakefile, nox
//     -f/--noxfile, tox -c/--conf, ninja -f, pre-commit -c/--config,
//     gradle -b/--build-file and -c/--settings-file, mvn -f/--file,
//     bazel --bazelrc, cmake -P, -C and --toolchain naming a file that is
//     not a guarded build file;
//   - just --shell, --shell-arg, --command/-c, --dotenv-path and
//     --dotenv-filename (the environment recipes run with); rake
//     -e/-p/-E (Ruby code), -r/--require, -R/--rakelibdir/--rakelib;
//     gradle -I/--init-script and a -D or -P org.gradle.* property (a
//     JVM, its options); tox exec (a command in an environment); pre-commit
//     try-repo (hooks from another repository); mvn's exec: goals, a
//     goal named by plugin coordinates (g:a:v:goal: any plugin), a -D
//     property outside a safe list (exec.executable, maven.ext.class.path);
//     bazel --run_under, --workspace_status_command, --credential_helper,
//     --host_jvm_args, a remote executor, cache or registry and an
//     *_env option (PATH for actions); cmake -E (but its reading
//     commands), -D of a compiler, launcher, linker, program, command,
//     file, include or flags key or any CMAKE_* key outside a safe list,
//     or a value that is not one plain word, and arguments after --build's
//     "--" (the native tool's: make CC=…); meson setup's --native-file
//     and --cross-file (a machine file naming compilers), meson devenv,
//     meson test's --wrapper and --gdb, meson subprojects foreach, meson
//     rewrite.

// buildFileCode says why tool reads the build file v (ok: literal) as
// code the matcher cannot read, or "".
func buildFileCode(tool, opt, v string, ok bool) string {
	if why := scriptFile(tool, cmdWord{lit: v, unknown: !ok}); why != "" {
		return why
	}
	if !codeFile(v) {
		return fmt.Sprintf("%s %s %s reads a build file the matcher does not guard as one", tool, opt, v)
	}
	return ""
}

// buildToolCode says why the build tool name (a base name) with words
// runs a file, program or command line the matcher cannot read; "" for
// any other program.
func buildToolCode(name string, words []cmdWord) string {
	var files, runs, longFiles, longRuns []string
	switch name {
	case "just":
		files, longFiles = []string{"-f"}, []string{"--justfile"}
		runs, longRuns = []string{"-c"}, []string{"--shell", "--shell-arg", "--command", "--dotenv-path", "--dotenv-filename"}
	case "task", "go-task":
		files, longFiles = []string{"-t"}, []string{"--taskfile"}
	case "rake":
		files, longFiles = []string{"-f"}, []string{"--rakefile"}
		runs, longRuns = []string{"-e", "-p", "-E", "-r", "-R"}, []string{"--execute", "--execute-print", "--execute-continue",
			"--require", "--rakelibdir", "--rakelib"}
	case "nox":
		files, longFiles = []string{"-f"}, []string{"--noxfile"}
	case "tox":
		files, longFiles = []string{"-c"}, []string{"--conf"}
	case "ninja", "ninja-build", "samu": // ninja's other names, as ctestNinjaCode reads them (review49b)
		files = []string{"-f"}
	case "pre-commit":
		files, longFiles = []string{"-c"}, []string{"--config"}
	case "gradle", "gradlew":
		files, longFiles = []string{"-b", "-c"}, []string{"--build-file", "--settings-file"}
		runs, longRuns = []string{"-I"}, []string{"--init-script"}
	case "mvn", "mvnw", "mvnd":
		files, longFiles = []string{"-f"}, []string{"--file"}
		runs, longRuns = []string{"-s", "-gs"}, []string{"--settings", "--global-settings"}
	case "bazel", "bazelisk":
		longFiles = []string{"--bazelrc"}
		longRuns = []string{"--run_under", "--workspace_status_command", "--credential_helper", "--host_jvm_args",
			"--remote_executor", "--remote_cache", "--remote_downloader", "--experimental_remote_downloader", "--registry",
			"--action_env", "--host_action_env", "--repo_env", "--test_env", "--server_javabase", "--override_repository",
			"--override_module"}
	case "cmake":
		files, longFiles = []string{"-P", "-C"}, []string{"--toolchain"}
	case "meson":
		longRuns = []string{"--native-file", "--cross-file", "--wrapper", "--gdb", "--gdb-path"}
	default:
		return ""
	}
	var pos []string
	for i := 1; i < len(words); i++ {
		w := words[i]
		if w.unknown {
			return notLiteral(name)
		}
		if w.lit == "--" {
			if name == "cmake" && i+1 < len(words) {
				return "cmake --build … -- ARGS hands ARGS to the native build tool (make CC=…), which the matcher does not read"
			}
			break
		}
		if name == "cmake" && w.lit == "-E" {
			if i+1 < len(words) && contains([]string{"capabilities", "echo", "echo_append", "md5sum", "sha1sum", "sha224sum",
				"sha256sum", "sha384sum", "sha512sum", "compare_files", "environment", "true", "false", "cat"}, words[i+1].lit) {
				return ""
			}
			return "cmake -E runs a command, or writes or removes files, as the matcher does not read"
		}
		opt, val, hasVal := strings.Cut(w.lit, "=")
		short := opt
		if !strings.HasPrefix(w.lit, "--") && len(opt) > 2 && !contains([]string{"-gs"}, opt) {
			short, val, hasVal = w.lit[:2], w.lit[2:], true // -fFILE, -DKEY=VALUE
		}
		switch {
		case strings.HasPrefix(w.lit, "--") && (contains(longRuns, opt) || name != "bazel" && longOption(opt, longRuns...)):
			return runsOption(name, opt)
		case strings.HasPrefix(w.lit, "--") && (contains(longFiles, opt) || name != "bazel" && longOption(opt, longFiles...)):
			v, ok := optionValue(words, &i, val, hasVal)
			if why := buildFileCode(name, opt, v, ok); why != "" {
				return why
			}
		case strings.HasPrefix(w.lit, "--") && name == "bazel" && strings.HasSuffix(opt, "_env"):
			return runsOption(name, opt)
		case !strings.HasPrefix(w.lit, "--") && contains(runs, short):
			return runsOption(name, short)
		case !strings.HasPrefix(w.lit, "--") && contains(files, short):
			v, ok := optionValue(words, &i, val, hasVal)
			if why := buildFileCode(name, short, v, ok); why != "" {
				return why
			}
		case !strings.HasPrefix(w.lit, "--") && (short == "-D" || short == "-P") || strings.HasPrefix(w.lit, "--") &&
			longOption(opt, "--system-prop", "--project-prop"):
			v, _ := optionValue(words, &i, val, hasVal)
			if why := propertyCode(name, short, v); why != "" {
				return why
			}
		case !strings.HasPrefix(w.lit, "-"):
			pos = append(pos, w.lit)
		}
	}
	return buildCommandCode(name, pos)
}

// propertyCode says why a -D (or -P) KEY=VALUE of gradle, mvn or cmake
// names a program or code, or "".
func propertyCode(name, opt, kv string) string {
	key, val, _ := strings.Cut(kv, "=")
	key, _, _ = strings.Cut(key, ":") // cmake -DKEY:TYPE=VALUE
	up := strings.ToUpper(key)
	bad := false
	switch name {
	case "gradle", "gradlew":
		bad = strings.HasPrefix(key, "org.gradle.")
	case "mvn", "mvnw", "mvnd":
		bad = opt == "-D" && !contains([]string{"skipTests", "maven.test.skip", "test", "it.test", "skipITs", "revision", "changelist",
			"sha1", "maven.javadoc.skip", "checkstyle.skip", "spotbugs.skip", "jacoco.skip", "gpg.skip", "style.color",
			"maven.source.skip", "enforcer.skip", "license.skip", "spotless.check.skip", "failIfNoTests",
			"surefire.failIfNoSpecifiedTests", "maven.compiler.source", "maven.compiler.target", "maven.compiler.release"}, key)
	case "cmake":
		if opt != "-D" {
			return ""
		}
		bad = !makeValuePlain(val) || strings.HasPrefix(up, "CMAKE_") && !contains([]string{"CMAKE_BUILD_TYPE",
			"CMAKE_INSTALL_PREFIX", "CMAKE_EXPORT_COMPILE_COMMANDS", "CMAKE_CXX_STANDARD", "CMAKE_C_STANDARD",
			"CMAKE_CXX_STANDARD_REQUIRED", "CMAKE_C_STANDARD_REQUIRED", "CMAKE_VERBOSE_MAKEFILE", "CMAKE_POSITION_INDEPENDENT_CODE",
			"CMAKE_COLOR_DIAGNOSTICS", "CMAKE_INSTALL_LIBDIR", "CMAKE_INSTALL_BINDIR", "CMAKE_INSTALL_INCLUDEDIR",
			"CMAKE_OSX_DEPLOYMENT_TARGET", "CMAKE_OSX_ARCHITECTURES", "CMAKE_UNITY_BUILD", "CMAKE_INTERPROCEDURAL_OPTIMIZATION"}, up)
		for _, s := range []string{"COMPILER", "LAUNCHER", "LINKER", "EXECUTABLE", "PROGRAM", "COMMAND", "FILE", "INCLUDE",
			"WRAPPER", "FLAGS", "TOOL", "PATH", "DIR", "ROOT"} {
			bad = bad || strings.Contains(up, s)
		}
	}
	if name == "meson" && opt == "-D" {
		// meson's compiler and linker arguments (c_args, cpp_link_args)
		// reach the compiler: -wrapper runs a program (branch attack48).
		bad = strings.HasSuffix(key, "_args") && !cgoFlagsSafe(strings.ReplaceAll(val, ",", " ")) || strings.Contains(key, "env")
	}
	if bad {
		return fmt.Sprintf("%s %s%s may name a program or code the matcher cannot read", name, opt, key)
	}
	return ""
}

// buildCommandCode says why the build tool name's positional words
// (pos: subcommands, goals) run a command or code, or "".
func buildCommandCode(name string, pos []string) string {
	first := ""
	if len(pos) > 0 {
		first = pos[0]
	}
	switch name {
	case "tox":
		if first == "exec" || first == "e" {
			return "tox exec runs a command in an environment"
		}
	case "pre-commit":
		if first == "try-repo" {
			return "pre-commit try-repo runs hooks from another repository"
		}
	case "mvn", "mvnw", "mvnd":
		for _, g := range pos {
			if strings.HasPrefix(g, "exec:") || strings.Count(g, ":") >= 2 || strings.HasPrefix(g, "antrun:") {
				return fmt.Sprintf("mvn %s runs a program or plugin the matcher cannot read", g)
			}
		}
	case "cmake":
		return "" // -E is read below
	case "meson":
		if contains([]string{"devenv", "rewrite"}, first) || first == "subprojects" && contains(pos, "foreach") {
			return fmt.Sprintf("meson %s runs a command or rewrites a build file", first)
		}
	}
	return ""
}
