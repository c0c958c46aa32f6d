package policy

import (
	"fmt"
	"path"
	"strings"
)

// tsc's project file (branch attack50). tsc without files reads
// tsconfig.json, whose compilerOptions name where it writes: outDir,
// outFile, declarationDir, tsBuildInfoFile. A tsconfig.json an allowed
// cp wrote with "outDir": ".vscode" and resolveJsonModule made a plain
// tsc copy an imported tasks.json (a task that runs on folderOpen) into
// .vscode/, and "tsBuildInfoFile": ".git/hooks/pre-commit" wrote there;
// tscOutputs reads only the command line. So tsc's and jsconfig's
// project files are guarded as files a program runs as code
// (tsConfigFile, read by codeFile), and a project tsc -p/--project or
// tsc -b/--build names is accepted only when it is "." or such a file:
// tsc reads any other path as a file of that name or a directory's
// tsconfig.json, which the matcher cannot tell apart.

// tsConfigFile reports whether base (a lower-case base name) names a
// TypeScript or JavaScript project file: tsconfig.json,
// tsconfig.*.json, jsconfig.json, jsconfig.*.json.
func tsConfigFile(base string) bool {
	return (strings.HasPrefix(base, "tsconfig.") || strings.HasPrefix(base, "jsconfig.")) && strings.HasSuffix(base, ".json")
}

// tscProjectCode says why tsc's words after the program (args) read a
// project file an allowed call may have written; "" when they do not:
// the value of -p/--project, and in build mode (-b/--build) each
// operand, must be "." or a guarded project file (tsConfigFile).
func tscProjectCode(args []cmdWord) string {
	build := false
	var projects []cmdWord
	for i := 0; i < len(args); i++ {
		w := args[i].lit
		opt, val, hasVal := strings.Cut(w, "=")
		switch l := strings.ToLower(opt); {
		case l == "-p" || l == "--project" || l == "-project":
			projects = append(projects, valueWord(args, &i, val, hasVal))
		case l == "-b" || l == "--build" || l == "-build":
			build = true
		case strings.HasPrefix(w, "-"):
		case build:
			projects = append(projects, args[i])
		}
	}
	for _, p := range projects {
		v := fileOf(p)
		if p.unknown || path.Clean(v) != "." && !tsConfigFile(strings.ToLower(path.Base(v))) {
			return fmt.Sprintf("tsc reads the project %q, whose outDir or outFile may name any file, from a file an allowed call may write", v)
		}
	}
	return ""
}
