package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"toolgate/internal/privfile"
)

// Check loads and validates the config file at path, as `toolgate policy
// check FILE` does, and returns every problem and warning as one line each,
// prefixed with path: YAML syntax errors, unknown keys, type errors and
// unset ${VAR}s (all with line numbers), then validation errors. The file
// is valid when problems is empty; then cfg is the loaded config (warnings,
// too, are only listed then), on which cmd runs the checks of serve that
// need the environment (token sources, secrets). When the file parsed as
// YAML but has problems, cfg is what could be decoded (a value that failed
// to decode keeps its default): fit only for [Config.EnvProblems], which
// assumes nothing Validate checks. After a syntax error cfg is zero.
func Check(path string, env Env) (cfg Config, problems, warnings []string) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, []string{err.Error()}, nil
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	cfg, root, errs, err := parseAll(f, env)
	if err != nil {
		if at, ok := atLine(path, err.Error()); ok {
			return Config{}, []string{at}, nil
		}
		return Config{}, []string{path + ": " + err.Error()}, nil
	}
	// Validate what could be decoded even when parsing found problems, so
	// every problem is reported at once (a value that failed to decode keeps
	// its default, which Validate may then accept).
	unset := unsetLines(errs, root)
	var later []error
	for _, err := range withLines(root, append(zeroErrors(root), cfg.Validate())) {
		if m := lineRE.FindStringSubmatch(err.Error()); m != nil && unset[m[1]] {
			continue // the value is empty because its variable is unset: said once
		}
		later = append(later, err)
	}
	errs = append(withLines(root, errs), later...)
	if len(errs) == 0 {
		for _, w := range cfg.Warnings() {
			warnings = append(warnings, path+": "+w)
		}
		return cfg, nil, warnings
	}
	for _, line := range Lines(errors.Join(errs...)) {
		if at, ok := atLine(path, line); ok {
			problems = append(problems, at)
		} else {
			problems = append(problems, path+": "+line)
		}
	}
	return cfg, problems, nil
}

// EnvProblems runs on c, a config that may not have passed Validate (as
// Check decodes a file with problems), the checks of serve's preflight
// that read the environment and files and assume nothing Validate checks:
// each agent's and approver's token, where it has exactly one source,
// token_env or token_file (set and not empty, readable and not empty);
// an approver's token file that is not private to the service user even
// where the token has several sources; and the notification channels'
// secrets ([Config.NotifySecrets]). readFile is the ReadFile of
// [Config.ReadFiles], which checks approver and notification secret files
// as it reads them, so each file's problem is said once. It returns them
// joined, in the words preflight uses, or nil. A token with no or several
// sources, or a malformed token_sha256, is Validate's problem and is
// skipped here, so nothing is said twice.
func (c Config) EnvProblems(env Env, readFile func(string) ([]byte, error)) error {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	var errs []error
	check := func(who string, t Token, private bool) {
		if (t.TokenEnv == "") == (t.TokenFile == "") || t.TokenSHA256 != "" {
			// Validate's problem; but a file that is not private is
			// this one's, whatever else the token sets.
			if private && t.TokenFile != "" && readFile != nil {
				if _, err := readFile(t.TokenFile); errors.As(err, new(*privfile.Error)) {
					errs = append(errs, fmt.Errorf("%s: %w", who, readError("token_file", t.TokenFile, err)))
				}
			}
			return
		}
		if t.TokenEnv != "" && !validVarName(t.TokenEnv) {
			return
		}
		if _, err := t.resolve(env, readFile); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", who, err))
		}
	}
	for i, a := range c.Agents {
		check(fmt.Sprintf("agents[%d] %q", i, a.ID), a.Token, false)
	}
	for i, a := range c.Approvers {
		check(fmt.Sprintf("approvers[%d] %q", i, a.ID), a.Token, true)
	}
	if _, err := c.NotifySecrets(env, readFile); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Lines flattens err, as returned by Load or Validate, into one line per
// problem: a joined error is listed one by one, and multi-line messages
// are split. It returns nil for a nil error.
func Lines(err error) []string {
	if err == nil {
		return nil
	}
	var out []string
	// Only a join at the top is split: a wrapped one keeps its prefix, and
	// its lines are split below.
	if j, ok := err.(interface{ Unwrap() []error }); ok { //nolint:errorlint // see above
		for _, e := range j.Unwrap() {
			out = append(out, Lines(e)...)
		}
		return out
	}
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// unsetLines is the set of lines (as the digits of "line N: ") on which
// errs, the problems of parsing, report an unset ${VAR}, among the lines
// of root that hold one key. A value whose variable is unset is empty, so
// validation would report it a second time ("storage.dsn: required for
// driver postgres" after "${DATABASE_URL} is not set"); Check leaves such
// problems out. A line with more keys (a flow mapping, a file written as
// one line of JSON) is left out of the set: its other keys' problems are
// not the variable's (attack36).
func unsetLines(errs []error, root *yaml.Node) map[string]bool {
	keys := map[int]int{}
	countKeys(root, keys, map[*yaml.Node]bool{})
	lines := map[string]bool{}
	for _, err := range errs {
		msg := err.Error()
		if m := lineRE.FindStringSubmatch(msg); m != nil && strings.Contains(msg, "} is not set (write ${") {
			if n, _ := strconv.Atoi(m[1]); keys[n] <= 1 {
				lines[m[1]] = true
			}
		}
	}
	return lines
}

// countKeys adds to keys, by line, the mapping keys of the tree at n.
func countKeys(n *yaml.Node, keys map[int]int, seen map[*yaml.Node]bool) {
	if n == nil || seen[n] {
		return
	}
	seen[n] = true
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			keys[n.Content[i].Line]++
		}
	}
	for _, c := range n.Content {
		countKeys(c, keys, seen)
	}
}
