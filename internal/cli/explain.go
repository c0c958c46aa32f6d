package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/config"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

const explainUsageText = `Usage:
  toolgate policy explain (--config FILE | --addr A [--token T])
                          --server S --tool T [--args JSON] [--principal P]
                          [--annotations read_only,destructive,...] [--dev] [--json]

Prints how the policy decides one call: the effect, every rule in file
order with each of its checks and whether it matched (and rules that only
nearly matched, such as get_* against get-env), the winner, monitor-mode
verdicts and the approval parameters; for a call held for approval, whether
the gate refuses it at once because too few configured approvers may review
it (code quorum_unreachable; JSON field quorum), or that the approvers are
not known (approvals.allow_no_approvers, or a config without approvers).

  --config FILE     evaluate the policy of this config file
  --addr A          or ask the live gateway's admin API (POST /v1/policy/explain;
                    any role that may read approvals); --token or $` + EnvToken + `.
                    Without --config or --addr: $` + EnvAddr + ` when it is set
  --server S        the real server name (not the exposed <server>__<tool>)
  --tool T          the real tool name
  --args JSON       the call's arguments object (default {})
  --principal P     an agent id; its groups, tenant and on_behalf_of come from
                    the config (default: no principal)
  --annotations L   the tool's annotation hints that are true, comma-separated
                    (read_only, destructive, idempotent, open_world; "none" for
                    all false); used only for a server with trust_annotations.
                    With --addr the live tool's own hints are used by default.
  --dev             with --config: count serve --dev's approver (dev-approver,
                    role admin) in the quorum check, as serve --dev does
  --json            print the explanation as JSON

Exit status: 0 ok (whatever the effect), 1 failure, 2 usage or invalid config.
`

// explainOptions are the flags of `policy explain` (and the connection and
// config flags of `policy test`).
type explainOptions struct {
	config, addr, token string
	server, tool, args  string
	principal           string
	annotations         string
	json, verbose       bool
	dev                 bool // --config: count serve --dev's approver
}

// RunExplain runs `toolgate policy explain` with args (the words after
// "explain"). lookup reads the environment (os.LookupEnv in main): for
// ${VAR} in the config file, where an unset variable expands to "" with a
// note (explaining needs only the policy), and for TOOLGATE_TOKEN.
func RunExplain(ctx context.Context, args []string, stdout, stderr io.Writer, lookup config.Env) int {
	var o explainOptions
	fs := flag.NewFlagSet("policy explain", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.config, "config", "", "config file")
	fs.StringVar(&o.addr, "addr", "", "admin API address")
	fs.StringVar(&o.token, "token", "", "bearer token")
	fs.StringVar(&o.server, "server", "", "server name")
	fs.StringVar(&o.tool, "tool", "", "tool name")
	fs.StringVar(&o.args, "args", "", "arguments JSON object")
	fs.StringVar(&o.principal, "principal", "", "agent id")
	fs.StringVar(&o.annotations, "annotations", "", "true annotation hints")
	fs.BoolVar(&o.json, "json", false, "print JSON")
	fs.BoolVar(&o.dev, "dev", false, "count serve --dev's approver")
	err := fs.Parse(args)
	if err == nil && o.config == "" && o.addr == "" {
		o.addr = envAddr(lookup) // as the other commands that ask the admin API
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = io.WriteString(stdout, explainUsageText)
		return ExitOK
	case err != nil:
		return usageExit(stderr, "explain", err.Error())
	case fs.NArg() > 0:
		return usageExit(stderr, "explain", fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case (o.config == "") == (o.addr == ""):
		return usageExit(stderr, "explain", "give exactly one of --config FILE or --addr A (or set $"+EnvAddr+")")
	case o.server == "" || o.tool == "":
		return usageExit(stderr, "explain", "--server and --tool are required")
	case o.dev && o.config == "":
		return usageExit(stderr, "explain", "--dev goes with --config (the live gateway counts its own approvers)")
	}
	req, err := explainBody(o.server, o.tool, o.args, o.principal, o.annotations)
	if err != nil {
		return usageExit(stderr, "explain", err.Error())
	}
	ex, err := newExplainer(o, lookup, stderr)
	if err != nil {
		return failure(stderr, err)
	}
	x, err := ex.explain(ctx, req)
	if err != nil {
		return failure(stderr, err)
	}
	if real, ok := strings.CutPrefix(o.tool, o.server+"__"); ok && real != "" {
		fmt.Fprintf(stderr, "note: --tool %q is the name agents see; rules match the real tool name: --tool %q\n", o.tool, real)
	}
	if o.json {
		b, _ := json.MarshalIndent(x, "", "  ")
		_ = writeJSON(stdout, b)
		return ExitOK
	}
	printExplanation(stdout, x)
	return ExitOK
}

// usageExit prints a usage error of `policy <cmd>` and returns ExitUsage.
func usageExit(stderr io.Writer, cmd, msg string) int {
	fmt.Fprintf(stderr, "toolgate: %s\nRun 'toolgate policy %s --help' for usage.\n", cleanLines(msg), cmd)
	return ExitUsage
}

// failure prints err and returns ExitUsage for a usageError (an invalid
// config) and ExitFailure otherwise.
func failure(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "toolgate: %s\n", cleanLines(err.Error()))
	var ue *usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitFailure
}

// explainBody builds the request for one call from command-line text.
func explainBody(server, tool, args, principal, annotations string) (api.ExplainBody, error) {
	b := api.ExplainBody{Server: server, Tool: tool, Principal: principal}
	if args != "" {
		if !json.Valid([]byte(args)) {
			return b, errors.New("--args: not valid JSON")
		}
		if a := strings.TrimLeft(args, " \t\r\n"); a[0] != '{' {
			// As a real tools/call (refused -32602 by the gateway).
			return b, errors.New("--args: must be a JSON object, as in a tools/call")
		}
		b.Arguments = json.RawMessage(args)
	}
	if annotations != "" {
		a, err := parseAnnotations(annotations)
		if err != nil {
			return b, err
		}
		b.Annotations = a
	}
	return b, nil
}

// parseAnnotations reads "read_only,idempotent" (the hints that are true)
// or "none".
func parseAnnotations(s string) (*policy.Annotations, error) {
	a := &policy.Annotations{}
	if s == "none" {
		return a, nil
	}
	for _, k := range strings.Split(s, ",") {
		switch strings.TrimSpace(k) {
		case "read_only":
			a.ReadOnly = true
		case "destructive":
			a.Destructive = true
		case "idempotent":
			a.Idempotent = true
		case "open_world":
			a.OpenWorld = true
		default:
			return nil, fmt.Errorf("--annotations: unknown hint %q (want read_only, destructive, idempotent, open_world or none)", k)
		}
	}
	return a, nil
}

// explainer explains calls against a config file or the live gateway.
type explainer struct {
	cfg    *config.Config // file mode
	dev    bool           // file mode: count serve --dev's approver
	client *client        // live mode
}

// envAddr is $TOOLGATE_ADDR by lookup, or "" (lookup nil or unset).
func envAddr(lookup config.Env) string {
	if lookup == nil {
		return ""
	}
	v, _ := lookup(EnvAddr)
	return v
}

// newExplainer prepares file mode (--config) or live mode (--addr).
func newExplainer(o explainOptions, lookup config.Env, stderr io.Writer) (*explainer, error) {
	if o.addr != "" {
		token := o.token
		if token == "" && lookup != nil {
			token, _ = lookup(EnvToken)
		}
		if token == "" {
			return nil, usagef("a token is required with --addr: --token or $%s", EnvToken)
		}
		c, err := newClient(o.addr, token)
		if err != nil {
			return nil, err
		}
		return &explainer{client: c}, nil
	}
	cfg, err := loadPolicyConfig(o.config, lookup, stderr)
	if err != nil {
		return nil, err
	}
	return &explainer{cfg: &cfg, dev: o.dev}, nil
}

// loadPolicyConfig loads a config file for explaining its policy. Unset
// ${VAR}s expand to "" (with a note on stderr). Problems outside the
// policy section (say a storage.dsn left empty by that) only draw a
// warning; a parse error or an invalid policy is a usage error.
func loadPolicyConfig(path string, lookup config.Env, stderr io.Writer) (config.Config, error) {
	var unset []string
	lenient := func(name string) (string, bool) {
		if lookup != nil {
			if v, ok := lookup(name); ok {
				return v, true
			}
		}
		if !slices.Contains(unset, name) {
			unset = append(unset, name)
		}
		return "", true
	}
	cfg, err := config.LoadFile(path, lenient)
	if len(unset) > 0 {
		fmt.Fprintf(stderr, "note: variables not set (empty unless they have a default): %s\n", strings.Join(unset, ", "))
	}
	if err == nil {
		return cfg, nil
	}
	if reflect.ValueOf(cfg).IsZero() {
		return cfg, usagef("%v", err) // it did not parse
	}
	if errs := cfg.Policy.Validate(); len(errs) > 0 {
		return cfg, usagef("%s: invalid policy:\n%v", path, errors.Join(errs...))
	}
	fmt.Fprintf(stderr, "warning: %s has problems outside its policy section (see toolgate policy check); explaining its policy anyway\n", path)
	return cfg, nil
}

// explain explains one call.
func (x *explainer) explain(ctx context.Context, b api.ExplainBody) (policy.Explanation, error) {
	if x.client != nil {
		resp, err := x.client.do(ctx, http.MethodPost, "/v1/policy/explain", b)
		if err != nil {
			return policy.Explanation{}, err
		}
		var out policy.Explanation
		return out, decodeJSON(resp.body, &out)
	}
	e, err := policy.Compile(&x.cfg.Policy)
	if err != nil {
		return policy.Explanation{}, usagef("%v", err)
	}
	call := x.cfg.PolicyCall(b.Server, b.Tool, b.Arguments, b.Principal, b.Annotations)
	out := e.Explain(call)
	// The gate's quorum check, with the roster serve makes of this config
	// (with serve --dev's approver under --dev): none known without
	// approvers.
	var roster []gate.Reviewer
	people := x.cfg.ApproverCredentials()
	if x.dev {
		people = append([]config.Credential{config.DevApprover()}, people...)
	}
	if len(people) > 0 {
		roster = gate.ReviewersOf(x.cfg.Reviewers(people))
	}
	gate.ExplainQuorum(&out, roster, approval.Principal{ID: call.Principal.ID, Tenant: call.Principal.Tenant, OnBehalfOf: call.Principal.OnBehalfOf})
	gate.ExplainGrants(&out, !x.cfg.Grants.Enabled)
	return out, nil
}

// printExplanation prints x for people. Everything from the server passes
// through clean.
func printExplanation(out io.Writer, x policy.Explanation) {
	p := func(format string, args ...any) { fmt.Fprintln(out, clean(fmt.Sprintf(format, args...))) }
	who := "(none)"
	if x.Principal != "" {
		who = x.Principal
		if len(x.Groups) > 0 {
			who += fmt.Sprintf(" (groups %s)", strings.Join(x.Groups, ", "))
		}
	}
	p("call:        server %s, tool %s, principal %s", x.Server, x.Tool, who)
	if x.Annotations != nil {
		p("annotations: read_only %v, destructive %v, idempotent %v, open_world %v", x.Annotations.ReadOnly, x.Annotations.Destructive, x.Annotations.Idempotent, x.Annotations.OpenWorld)
	} else {
		p("annotations: unknown (the server is not marked trust_annotations, or no hints were given)")
	}
	winner := x.Rule
	if winner == policy.DefaultRule {
		winner = "the default"
	} else {
		winner = fmt.Sprintf("rule %q", winner)
	}
	p("effect:      %s, decided by %s", x.Effect, winner)
	if x.Monitor.Verdict != "" {
		p("monitor:     %s by %q (monitor mode: the call proceeds as %s)", x.Monitor.Verdict, x.Monitor.Rule, x.Effect)
	}
	if a := x.Approval; a != nil {
		approvers := "anyone with the approver role"
		if len(a.Approvers) > 0 {
			approvers = strings.Join(a.Approvers, ", ")
		}
		timeout := a.Timeout
		if a.TimeoutRule != "" && a.TimeoutRule != x.Rule {
			// The shortest of the matching approve rules' (not the deciding
			// rule's): say whose, as approvals show hints.
			timeout += fmt.Sprintf(" (from rule %q)", a.TimeoutRule)
		}
		p("approval:    %d approval(s) from %s, timeout %s, valid_for %s, mode %s", a.Approvals, approvers, timeout, a.ValidFor, a.Mode)
		switch {
		case a.Grants:
			p("grants:      allowed: an approver may remember an approval of this call as a grant, and a grant may admit it")
		case a.GrantsDisabled:
			p("grants:      forbidden by the config (grants.enabled: false): no grant is made and none admits a call; every such call needs its own approval")
		default:
			p("grants:      forbidden (grants: false): no grant is made for this call and none admits it; every such call needs its own approval")
		}
	}
	if x.NoEligibleApprovers {
		p("             the matching approve rules have no approver in common: nobody can approve, so the call is refused")
	}
	switch q := x.Quorum; {
	case q == nil:
	case q.Refused:
		p("gate:        refuses it at once (code %s); the agent is told: %s", q.Code, q.Message)
		if x.Approval != nil && x.Approval.Grants {
			// The gate reads the caller's grants before it checks the
			// quorum: a standing grant still admits the call (grants51).
			p("             unless a standing grant of the caller admits it: the gate checks grants before the quorum (explain does not read grants)")
		}
	case !q.Known:
		// Not "the gate refuses …": with allow_no_approvers the gate has
		// no roster either and holds the call (review50).
		p("quorum:      not checked: the approvers are not known here; with approvals.allow_no_approvers the gate does not check it either and holds the call; a config without approvers serves only under serve --dev, whose approver the gate counts (pass --dev, or ask the live gateway: --addr)")
	default:
		p("quorum:      reachable: enough configured approvers may review the request; the gate holds the call")
	}
	if x.Revision != "" {
		p("revision:    %s", x.Revision)
	}
	p("")
	p("rules, in file order:")
	for _, r := range x.Rules {
		mark := "no match"
		if r.Matched {
			mark = "MATCH"
			if r.Name == x.Rule {
				mark = "MATCH, decides"
			}
		}
		mon := ""
		if r.Monitored {
			mon = " (monitor mode)"
		}
		p("  [%d] %q %s%s: %s", r.Index, r.Name, r.Effect, mon, mark)
		for _, w := range r.Why {
			p("        %s", w)
		}
		if r.NearMiss != "" {
			p("        NEAR MISS: %s", r.NearMiss)
		}
	}
	if len(x.Rules) == 0 {
		p("  (none)")
	}
	def := fmt.Sprintf("default: %s", x.Default)
	if x.DefaultMonitored {
		def += " (monitor mode: policy.enforce is false)"
	}
	if x.Rule == policy.DefaultRule {
		def += ", decides"
	}
	p("%s", def)
}
