package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"toolgate/internal/api"
	"toolgate/internal/config"
	"toolgate/internal/policy"
)

const testUsageText = `Usage:
  toolgate policy test CASES.yaml [--config FILE | --addr A [--token T]] [-v]

Runs a table of calls against a policy and checks the effect of each, like
a test runner: every failing case is printed with what was wanted and what
the policy decided (and why); the exit status is 1 if any case fails.

The policy is the one of --config FILE, else of the config file named by
the cases file's "config:" key (relative to the cases file), or, with
--addr (else $` + EnvAddr + `), the live gateway's (POST /v1/policy/explain;
--token or $` + EnvToken + `).

CASES.yaml:

  config: policy.yaml          # optional
  cases:
    - name: small transfers run at once
      server: pay              # the real server and tool names
      tool: transfer
      principal: agent-1       # optional: an agent id of the config
      args: {amount: 100}      # optional: a mapping, or a string of JSON
      annotations: [read_only] # optional: the hints that are true ([] for none)
      expect: allow            # allow, deny or approve
      rule: small transfers    # optional: the deciding rule ("default")
      monitor: would_deny      # optional: would_deny, would_hold or none

Numbers in args are written to JSON as they are spelled (integers beyond
int64 included); write them as JSON numbers.

  -v    print passing cases too

Exit status: 0 all cases pass, 1 a case fails (or a request fails), 2 usage
or an invalid cases or config file.
`

// casesFile is the YAML of `policy test`.
type casesFile struct {
	Config string       `yaml:"config"`
	Cases  []policyCase `yaml:"cases"`
}

// policyCase is one call and what the policy should decide.
type policyCase struct {
	Name        string    `yaml:"name"`
	Server      string    `yaml:"server"`
	Tool        string    `yaml:"tool"`
	Principal   string    `yaml:"principal"`
	Args        yaml.Node `yaml:"args"`
	Annotations *[]string `yaml:"annotations"`
	Expect      string    `yaml:"expect"`
	Rule        string    `yaml:"rule"`
	Monitor     string    `yaml:"monitor"`

	line int
	body api.ExplainBody
}

// RunPolicyTest runs `toolgate policy test` with args (the words after
// "test"); lookup reads the environment as for [RunExplain].
func RunPolicyTest(ctx context.Context, args []string, stdout, stderr io.Writer, lookup config.Env) int {
	var o explainOptions
	fs := flag.NewFlagSet("policy test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.config, "config", "", "config file")
	fs.StringVar(&o.addr, "addr", "", "admin API address")
	fs.StringVar(&o.token, "token", "", "bearer token")
	fs.BoolVar(&o.verbose, "v", false, "print passing cases too")
	flags, pos := splitArgs(args, fs)
	err := fs.Parse(flags)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = io.WriteString(stdout, testUsageText)
		return ExitOK
	case err != nil:
		return usageExit(stderr, "test", err.Error())
	case len(pos) != 1:
		return usageExit(stderr, "test", "want exactly one cases file")
	case o.config != "" && o.addr != "":
		return usageExit(stderr, "test", "give at most one of --config and --addr")
	}
	cf, err := readCases(pos[0])
	if err != nil {
		return usageExit(stderr, "test", err.Error())
	}
	if o.config == "" && o.addr == "" {
		switch {
		case cf.Config != "":
			o.config = cf.Config
			if !filepath.IsAbs(o.config) {
				o.config = filepath.Join(filepath.Dir(pos[0]), o.config)
			}
		case envAddr(lookup) != "":
			o.addr = envAddr(lookup)
		default:
			return usageExit(stderr, "test", "no policy: give --config, --addr, a config: key in the cases file, or set $"+EnvAddr)
		}
	}
	ex, err := newExplainer(o, lookup, stderr)
	if err != nil {
		return failure(stderr, err)
	}
	failed := 0
	for i := range cf.Cases {
		c := &cf.Cases[i]
		x, err := ex.explain(ctx, c.body)
		if err != nil {
			return failure(stderr, fmt.Errorf("case %q (%s:%d): %w", c.Name, pos[0], c.line, err))
		}
		if problems := c.check(x); len(problems) > 0 {
			failed++
			printFailure(stdout, pos[0], c, x, problems)
		} else if o.verbose {
			fmt.Fprintln(stdout, clean(fmt.Sprintf("--- PASS: %s (%s:%d)", c.Name, pos[0], c.line)))
		}
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "FAIL: %d of %d cases failed\n", failed, len(cf.Cases))
		return ExitFailure
	}
	fmt.Fprintf(stdout, "PASS: %d cases\n", len(cf.Cases))
	return ExitOK
}

// readCases reads and checks a cases file.
func readCases(path string) (casesFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return casesFile{}, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return casesFile{}, fmt.Errorf("%s: %w", path, err)
	}
	var cf casesFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cf); err != nil {
		return casesFile{}, fmt.Errorf("%s: %w", path, err)
	}
	lines := caseLines(&doc)
	var errs []error
	if len(cf.Cases) == 0 {
		errs = append(errs, fmt.Errorf("%s: no cases", path))
	}
	names := map[string]bool{}
	for i := range cf.Cases {
		c := &cf.Cases[i]
		if i < len(lines) {
			c.line = lines[i]
		}
		where := fmt.Sprintf("%s:%d: cases[%d]", path, c.line, i)
		if c.Name == "" {
			c.Name = fmt.Sprintf("cases[%d]", i)
		}
		if names[c.Name] {
			errs = append(errs, fmt.Errorf("%s: name %q is used twice", where, c.Name))
		}
		names[c.Name] = true
		if c.Server == "" || c.Tool == "" {
			errs = append(errs, fmt.Errorf("%s: server and tool are required", where))
		}
		if !policy.Effect(c.Expect).Valid() {
			errs = append(errs, fmt.Errorf("%s: expect %q: want allow, deny or approve", where, c.Expect))
		}
		if m := c.Monitor; m != "" && m != policy.WouldDeny && m != policy.WouldHold && m != "none" {
			errs = append(errs, fmt.Errorf("%s: monitor %q: want would_deny, would_hold or none", where, m))
		}
		c.body = api.ExplainBody{Server: c.Server, Tool: c.Tool, Principal: c.Principal}
		if c.Args.Kind != 0 {
			raw, err := argsJSON(&c.Args)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: args: %w", where, err))
			}
			c.body.Arguments = raw
		}
		if c.Annotations != nil {
			a, err := parseAnnotations(strings.Join(*c.Annotations, ","))
			if len(*c.Annotations) == 0 {
				a, err = &policy.Annotations{}, nil
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
			c.body.Annotations = a
		}
	}
	return cf, errors.Join(errs...)
}

// caseLines returns the line of each entry of the cases list.
func caseLines(doc *yaml.Node) []int {
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "cases" && root.Content[i+1].Kind == yaml.SequenceNode {
			var out []int
			for _, n := range root.Content[i+1].Content {
				out = append(out, n.Line)
			}
			return out
		}
	}
	return nil
}

// check compares x with what c expects and lists the differences.
func (c *policyCase) check(x policy.Explanation) []string {
	var out []string
	if string(x.Effect) != c.Expect {
		out = append(out, fmt.Sprintf("effect: want %s, got %s", c.Expect, x.Effect))
	}
	if c.Rule != "" && x.Rule != c.Rule {
		out = append(out, fmt.Sprintf("rule: want %q, got %q", c.Rule, x.Rule))
	}
	switch got := x.Monitor.Verdict; {
	case c.Monitor == "":
	case c.Monitor == "none" && got != "":
		out = append(out, fmt.Sprintf("monitor: want none, got %s by %q", got, x.Monitor.Rule))
	case c.Monitor != "none" && got != c.Monitor:
		out = append(out, fmt.Sprintf("monitor: want %s, got %q", c.Monitor, got))
	}
	return out
}

// printFailure prints one failing case like a test runner, with the rules
// that matched and the near misses.
func printFailure(out io.Writer, path string, c *policyCase, x policy.Explanation, problems []string) {
	p := func(format string, args ...any) { fmt.Fprintln(out, clean(fmt.Sprintf(format, args...))) }
	p("--- FAIL: %s (%s:%d)", c.Name, path, c.line)
	who := c.Principal
	if who == "" {
		who = "(none)"
	}
	p("    call: server %s, tool %s, principal %s", c.Server, c.Tool, who)
	for _, pr := range problems {
		p("    %s", pr)
	}
	decided := "the default"
	if x.Rule != policy.DefaultRule {
		decided = fmt.Sprintf("rule %q", x.Rule)
	}
	p("    decided by %s; matched: %s", decided, quotedList(x.Matched))
	for _, r := range x.Rules {
		if r.NearMiss != "" {
			p("    near miss, rule %q: %s", r.Name, r.NearMiss)
		}
		for _, e := range r.Errors {
			p("    rule %q: %s", r.Name, e)
		}
	}
}

func quotedList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// jsonNumber is the grammar of a JSON number (RFC 8259).
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// argsJSON turns the YAML args of a case into JSON: a mapping (numbers
// keep their spelling), or a string holding a JSON object.
func argsJSON(n *yaml.Node) (json.RawMessage, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		if !json.Valid([]byte(n.Value)) {
			return nil, errors.New("the string is not valid JSON")
		}
		return json.RawMessage(n.Value), nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping (or a string of JSON)", n.Line)
	}
	var b bytes.Buffer
	if err := writeYAMLJSON(&b, n, 0); err != nil {
		return nil, err
	}
	return json.RawMessage(b.Bytes()), nil
}

// maxArgsDepth bounds the nesting of case arguments.
const maxArgsDepth = 100

func writeYAMLJSON(b *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > maxArgsDepth {
		return fmt.Errorf("line %d: nested too deep", n.Line)
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		var seen []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a key must be a string", k.Line)
			}
			if slices.Contains(seen, k.Value) {
				return fmt.Errorf("line %d: key %q repeated", k.Line, k.Value)
			}
			seen = append(seen, k.Value)
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k.Value)
			b.Write(kb)
			b.WriteByte(':')
			if err := writeYAMLJSON(b, n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeYAMLJSON(b, c, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			b.WriteString("null")
		case "!!bool":
			var v bool
			if err := n.Decode(&v); err != nil {
				return fmt.Errorf("line %d: %w", n.Line, err)
			}
			b.WriteString(strconv.FormatBool(v))
		case "!!int", "!!float":
			switch {
			case jsonNumber.MatchString(n.Value):
				b.WriteString(n.Value)
			case n.ShortTag() == "!!int":
				i, ok := new(big.Int).SetString(strings.ReplaceAll(n.Value, "_", ""), 0)
				if !ok {
					return fmt.Errorf("line %d: %q is not a JSON number", n.Line, n.Value)
				}
				b.WriteString(i.String())
			default:
				return fmt.Errorf("line %d: %q is not a JSON number", n.Line, n.Value)
			}
		default:
			sb, _ := json.Marshal(n.Value)
			b.Write(sb)
		}
	default:
		return fmt.Errorf("line %d: unsupported YAML", n.Line)
	}
	return nil
}
