package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"toolgate/internal/api"
	"toolgate/internal/store"
)

const policyUsageText = `Usage: toolgate policy <command> [flags]

Commands:
  check [--dev] [--stdio] [--insecure-no-auth] [--tools SERVER=FILE]... FILE
        Run every check serve runs before it starts, as serve with those
        flags would (token variables and files, the admin socket
        directory, secrets kept from upstreams): prints every problem
        (FILE:LINE: where it has a line) and exits 2 if serve would refuse
        to start. Run it where serve runs. Warns (exit 0) about rules that
        never decide a call (an allow rule an approve or deny rule covers),
        an allow rule for one exact call (when: args == {...}) that a deny
        or approve rule also matches, and conditions testing a path by
        string prefix (startsWith("/...")).
        --tools (the JSON of a server's tools/list) also warns about when
        conditions reading argument fields, and command rules naming an
        argument, that the tools' input schemas do not declare.
  explain (--config FILE | --addr A) --server S --tool T [--args JSON] [--principal P]
        How the policy decides one call, rule by rule (see "policy explain --help").
  test CASES.yaml [--config FILE | --addr A] [-v]
        Check a table of calls against the policy; exit 1 on any mismatch
        (see "policy test --help").

Store-backed policy (policy.source: store):
  propose FILE [--base N]
        Propose FILE's policy (a policy document, or a config file whose
        "policy:" key is used) as the next revision. A change that only
        narrows applies at once; anything else creates an approval that a
        different admin approves with "toolgate approvals approve <id>",
        which applies it. --base is the revision the change was made
        against (default: the current one).
  show [--revision N]
        Show a revision (default: the current one) with its change summary.
  diff A B
        Summarise the change from revision A to revision B.
  apply <approval-id>
        Apply an approved proposal whose apply on approval failed.

Flags for propose, show, diff and apply:
  --addr A    admin API address (default $TOOLGATE_ADDR, else ` + DefaultAddr + `)
  --token T   bearer token (default $TOOLGATE_TOKEN; required; admin role to
              propose and apply)
  --json      print the server's JSON instead of text

Exit status: 0 ok, 1 failure (including errors from the server), 2 usage.
`

// PolicyUsage writes the help text of `toolgate policy` to w.
func PolicyUsage(w io.Writer) { _, _ = io.WriteString(w, policyUsageText) }

type policyOptions struct {
	conn
	base     int64
	revision int64
}

// policyCommands are the REST commands of `toolgate policy`.
var policyCommands = group[policyOptions]{
	name:  "policy",
	want:  "check, explain, test, propose, show, diff or apply",
	usage: PolicyUsage,
	conn:  func(o *policyOptions) *conn { return &o.conn },
	check: func(_ string, o *policyOptions) error {
		if o.base < 0 || o.revision < 0 {
			return usagef("revisions are numbers >= 1")
		}
		return nil
	},
	commands: map[string]subcommand[policyOptions]{
		"propose": {
			synopsis: "propose FILE [--base N]",
			args:     1,
			flags: func(fs *flag.FlagSet, o *policyOptions) {
				fs.Int64Var(&o.base, "base", 0, "revision the change is made against (default: the current one)")
			},
			run: runPropose,
		},
		"show": {
			synopsis: "show [--revision N]",
			flags: func(fs *flag.FlagSet, o *policyOptions) {
				fs.Int64Var(&o.revision, "revision", 0, "revision to show (default: the current one)")
			},
			run: runPolicyShow,
		},
		"diff":  {synopsis: "diff A B", args: 2, run: runPolicyDiff},
		"apply": {synopsis: "apply <approval-id>", args: 1, run: runPolicyApply},
	},
}

// RunPolicy runs the REST commands of `toolgate policy` (propose, show,
// diff, apply) with args (the words after "policy"), like Run: results to
// stdout, errors to stderr, and ExitOK, ExitFailure or ExitUsage.
func RunPolicy(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) int {
	return policyCommands.Run(ctx, args, stdout, stderr, env)
}

// policyText returns the policy document in data: the "policy" key of a
// config file, or data itself.
func policyText(data []byte) (string, error) {
	var top map[string]yaml.Node
	if err := yaml.Unmarshal(data, &top); err != nil {
		return "", fmt.Errorf("parse: %w", err)
	}
	n, ok := top["policy"]
	if !ok {
		return string(data), nil
	}
	b, err := yaml.Marshal(&n)
	if err != nil {
		return "", fmt.Errorf("encode the policy key: %w", err)
	}
	return string(b), nil
}

func runPropose(ctx context.Context, c *client, o *policyOptions, args []string, out io.Writer) error {
	data, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	text, err := policyText(data)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	base := o.base
	if base == 0 {
		var cur store.PolicyRevision
		if _, err := c.get(ctx, "/v1/policy", &cur); err != nil {
			return err
		}
		base = cur.Revision
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/policy/proposals", api.ProposeBody{BaseRevision: base, Policy: quoteJSON(text)})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, resp.body)
	}
	var res api.ProposeResult
	if err := decodeJSON(resp.body, &res); err != nil {
		return err
	}
	var b strings.Builder
	if res.Applied && res.Revision != nil {
		fmt.Fprintf(&b, "applied: revision %d (the change only narrows)\n", res.Revision.Revision)
	} else if res.Approval != nil {
		fmt.Fprintf(&b, "approval required: %s\nAnother admin approves it with: toolgate approvals approve %s\nIt widens:\n", res.Approval.ID, res.Approval.ID)
		for _, w := range res.Widens {
			fmt.Fprintf(&b, "  %s\n", w)
		}
	}
	b.WriteString("Changes:\n")
	for _, d := range res.Diff {
		fmt.Fprintf(&b, "  %s\n", d)
	}
	_, err = io.WriteString(out, cleanLines(b.String()))
	return err
}

// quoteJSON returns s as a JSON string.
func quoteJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}

func runPolicyShow(ctx context.Context, c *client, o *policyOptions, _ []string, out io.Writer) error {
	path := "/v1/policy"
	if o.revision > 0 {
		path += "?revision=" + strconv.FormatInt(o.revision, 10)
	}
	var rev store.PolicyRevision
	resp, err := c.get(ctx, path, &rev)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, resp.body)
	}
	return printRevision(out, rev)
}

func printRevision(out io.Writer, rev store.PolicyRevision) error {
	var b strings.Builder
	fmt.Fprintf(&b, "revision:   %d\ndigest:     %s\ncreated:    %s by %s\n", rev.Revision, rev.Digest, stamp(rev.CreatedAt), rev.CreatedBy)
	if rev.ApprovalID != "" {
		fmt.Fprintf(&b, "approval:   %s\n", rev.ApprovalID)
	}
	if len(rev.Diff) > 0 {
		b.WriteString("changes:\n")
		for _, d := range rev.Diff {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	b.WriteString("policy:\n")
	for _, line := range strings.Split(strings.TrimRight(rev.Policy, "\n"), "\n") {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	_, err := io.WriteString(out, cleanLines(b.String()))
	return err
}

func runPolicyDiff(ctx context.Context, c *client, o *policyOptions, args []string, out io.Writer) error {
	from, err1 := strconv.ParseInt(args[0], 10, 64)
	to, err2 := strconv.ParseInt(args[1], 10, 64)
	if err1 != nil || err2 != nil || from < 1 || to < 1 {
		return usagef("diff %q %q: want two revision numbers", args[0], args[1])
	}
	var d api.PolicyDiff
	resp, err := c.get(ctx, fmt.Sprintf("/v1/policy/diff?from=%d&to=%d", from, to), &d)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, resp.body)
	}
	if len(d.Diff) == 0 {
		_, err = fmt.Fprintf(out, "revisions %d and %d decide alike\n", from, to)
		return err
	}
	var b strings.Builder
	for _, line := range d.Diff {
		fmt.Fprintf(&b, "%s\n", line)
	}
	_, err = io.WriteString(out, cleanLines(b.String()))
	return err
}

func runPolicyApply(ctx context.Context, c *client, o *policyOptions, args []string, out io.Writer) error {
	id, err := resolveID(ctx, c, args[0])
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/policy/proposals/"+id+"/apply", nil)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, resp.body)
	}
	var rev store.PolicyRevision
	if err := decodeJSON(resp.body, &rev); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "applied: revision %d\n", rev.Revision)
	return err
}
