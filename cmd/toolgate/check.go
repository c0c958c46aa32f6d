package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"toolgate/internal/config"
)

// checkCmd runs "toolgate policy check [--dev] [--stdio]
// [--insecure-no-auth] [--tools SERVER=FILE]... FILE": it loads and validates FILE and then runs
// preflight, the checks serve runs before it starts, with serve's flags
// and in this process's environment (token variables, token files, the
// admin socket directory, the secrets kept from upstreams). It prints
// every problem and exits 2 when there is any, so it fails exactly when
// `serve --config FILE` with the same flags, run here, would refuse to
// start; warnings are printed and do not fail. A file with problems of
// its own gets, in the same run, the environment's problems too
// (config.EnvProblems: token variables and files, notification secrets)
// and the missing upstream commands. Run it where, and as whom,
// serve runs. It warns about rules that never decide a call (an allow rule
// an approve or deny rule covers: config.ShadowedRules) and about when
// conditions testing a path by string prefix (policy.PathPrefixes). With --tools (the
// tools/list of a configured server), it also warns about when conditions
// that read an argument field, and command selectors whose argument, the
// input schema of no tool their rule matches declares (a typo never
// matches, or for a deny rule always does).
func checkCmd(args []string, stdout, stderr io.Writer, sys system) int {
	var f serveFlags
	var tools toolsFlag
	fs := flag.NewFlagSet("policy check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&f.dev, "dev", false, "check as serve --dev would (it mints agent and approver tokens)")
	fs.BoolVar(&f.stdio, "stdio", false, "check as serve --stdio would (no agent listener; no admin listener unless configured)")
	fs.BoolVar(&f.insecureNoAuth, "insecure-no-auth", false, "check as serve --insecure-no-auth would")
	var files []string
	fs.Func("config", "the config file, as serve takes it (or FILE)", func(v string) error {
		if strings.TrimSpace(v) == "" { // "", or blanks left by a quoted variable
			return errors.New("want a file's path")
		}
		files = append(files, v)
		return nil
	})
	fs.Var(&tools, "tools", "SERVER=FILE: the JSON of the server's tools/list; warn about when conditions reading argument fields, and command rules naming an argument, that its tools' input schemas do not declare (repeatable)")
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "usage: toolgate policy check [--dev] [--stdio] [--insecure-no-auth] [--tools SERVER=FILE]... FILE | --config FILE")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	fs.Usage = func() {} // printed below: to stdout when asked for, else to stderr
	// Flags may come after FILE too ("policy check FILE --dev", as one
	// adds a flag to the command just run): parse again after each word.
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage(stdout)
				return 0
			}
			usage(stderr)
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 || strings.TrimSpace(files[0]) == "" {
		if len(files) == 1 {
			fmt.Fprintln(stderr, "toolgate: policy check: the config file's path is empty or blank")
		}
		usage(stderr)
		return 2
	}
	path := files[0]
	f.config = path
	cfg, problems, _ := config.Check(path, sys.lookupEnv)
	read := sys.files(cfg)
	if len(problems) == 0 {
		for _, w := range serveWarnings(cfg, f, sys, read) {
			fmt.Fprintf(stderr, "warning: %s: %s\n", path, w)
		}
		for _, w := range config.ShadowedRules(path, cfg) {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
		for _, w := range config.OverruledExactCalls(path, cfg) {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
		var prefixes []error
		for _, err := range cfg.Policy.PathPrefixes() {
			prefixes = append(prefixes, fmt.Errorf("policy.%w", err))
		}
		for _, w := range config.AtLines(path, prefixes) {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
		if len(tools) > 0 {
			known, err := readTools(cfg, tools)
			if err != nil {
				fmt.Fprintf(stderr, "toolgate policy check: %v\n", err)
				return 2
			}
			var unknown []error
			for _, err := range cfg.Policy.UnknownArgFields(known) {
				unknown = append(unknown, fmt.Errorf("policy.%w", err))
			}
			for _, w := range config.AtLines(path, unknown) {
				fmt.Fprintf(stderr, "warning: %s\n", w)
			}
		}
		if _, err := preflight(cfg, f, sys, read); err != nil {
			problems = append(problems, preflightLines(path, err)...)
		}
	} else {
		// The file has problems: still say, in the same run, what the
		// environment lacks (token variables, files, commands), so one
		// fix-and-rerun round shows everything.
		for _, w := range commandWarnings(cfg, sys) {
			fmt.Fprintf(stderr, "warning: %s: %s\n", path, w)
		}
		if err := cfg.EnvProblems(sys.lookupEnv, read.ReadFile); err != nil {
			problems = append(problems, preflightLines(path, err)...)
		}
	}
	if len(problems) > 0 {
		n := 0
		for _, p := range problems {
			fmt.Fprintln(stderr, p)
			// A problem's further lines (a CEL error's source line and
			// caret) are indented; they are not problems of their own.
			if !strings.HasPrefix(strings.TrimPrefix(p, path+": "), " ") {
				n++
			}
		}
		fmt.Fprintf(stderr, "%s: %d problem(s)\n", path, n)
		return 2
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	return 0
}

// preflightLines is preflight's error err about the config file at path,
// one line per problem: "path:12: msg" where the file has the key the
// problem is about ("agents[0] \"bot\": token_env BOT_TOKEN is not set" names
// the agent's line), "path: msg" otherwise. A problem's further lines are
// lines of their own, "path: " in front, as config.Lines splits them.
func preflightLines(path string, err error) []string {
	var out []string
	for _, at := range config.AtLines(path, flatten(err)) {
		first, rest, _ := strings.Cut(at, "\n")
		out = append(out, first)
		for _, l := range config.Lines(errors.New(rest)) {
			out = append(out, path+": "+l)
		}
	}
	return out
}

// flatten lists the problems of err, taking joined errors apart.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok { //nolint:errorlint // only joins are taken apart
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
