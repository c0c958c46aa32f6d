package policy

import (
	"fmt"
	"strings"
)

// Explanation says how a policy decides one call: the decision and, for
// every rule in file order, whether it matched and why (or why not). It is
// what `toolgate policy explain` prints and POST /v1/policy/explain
// returns. Its text may quote argument values (a command, a condition's
// error): it is for the person who asked, not for logs.
type Explanation struct {
	Server    string   `json:"server"`
	Tool      string   `json:"tool"`
	Principal string   `json:"principal"`
	Groups    []string `json:"groups,omitempty"`
	Revision  string   `json:"revision,omitempty"`
	// Annotations are the tool annotations the rules saw; nil: unknown.
	Annotations *Annotations `json:"annotations"`
	// Effect, Rule, Matched, NoEligibleApprovers and Monitor are those of
	// the Decision.
	Effect              Effect   `json:"effect"`
	Rule                string   `json:"rule"`
	Matched             []string `json:"matched"`
	NoEligibleApprovers bool     `json:"no_eligible_approvers,omitempty"`
	Monitor             Monitor  `json:"monitor"`
	// Approval holds the approval parameters when Effect is approve.
	Approval *ApprovalText `json:"approval,omitempty"`
	// Default is the policy's default effect; DefaultMonitored is true when
	// policy.enforce is false.
	Default          Effect      `json:"default"`
	DefaultMonitored bool        `json:"default_monitored,omitempty"`
	Rules            []RuleTrace `json:"rules"`
	// Notes explain outcomes the rule traces alone do not.
	Notes []string `json:"notes,omitempty"`
	// Quorum is what the gate's quorum check says of a call the policy
	// holds for approval (Effect approve, some approver eligible): set by
	// the gate's ExplainQuorum (policy explain, the admin API's explain),
	// nil otherwise.
	Quorum *QuorumCheck `json:"quorum,omitempty"`
}

// QuorumCheck is the gate's quorum check of an explained call: whether
// the approvers who may review the caller's request (those the config
// gives the admin API, less the caller and the person it acts for) can
// reach the approval's quorum.
type QuorumCheck struct {
	// Known is false when the approvers are not known where the call was
	// explained (approvals.allow_no_approvers, or a config with no
	// approvers): nothing was checked, and the gate holds the call.
	Known bool `json:"known"`
	// Refused is true when the gate refuses the call at once instead of
	// holding it; Code (quorum_unreachable) and Message (the words the
	// agent gets) are then set.
	Refused bool   `json:"refused"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// ApprovalText is an Approval with durations written as Go durations
// ("5m0s"), for explanations.
type ApprovalText struct {
	Timeout   string   `json:"timeout"`
	Mode      string   `json:"mode"`
	Approvals int      `json:"approvals"`
	Approvers []string `json:"approvers"`
	ValidFor  string   `json:"valid_for"`
	// TimeoutRule names the rule the timeout comes from (Decision.TimeoutRule).
	TimeoutRule string `json:"timeout_rule,omitempty"`
	// Grants is whether an approval of the call may be remembered as a
	// grant and a grant may stand in for it (Approval.GrantsAllowed; false
	// when any matching approve rule, or the policy's approval, says
	// grants: false). The config's grants.enabled is not part of it.
	Grants bool `json:"grants"`
	// GrantsDisabled is set (with Grants false) when the deployment turns
	// grants off (config grants.enabled: false), which the gate or the
	// CLI adds to the explanation.
	GrantsDisabled bool `json:"grants_disabled,omitempty"`
}

func explainApproval(a Approval, timeoutRule string) *ApprovalText {
	return &ApprovalText{Timeout: a.Timeout.String(), Mode: a.Mode, Approvals: a.Approvals, Approvers: nonNil(a.Approvers), ValidFor: a.ValidFor.String(), TimeoutRule: timeoutRule, Grants: a.GrantsAllowed()}
}

// RuleTrace is one rule's part of an Explanation.
type RuleTrace struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	Effect    Effect `json:"effect"`
	Monitored bool   `json:"monitored,omitempty"`
	Matched   bool   `json:"matched"`
	// Why lists each check in order, with its outcome: "server: fs matches
	// \"fs\"", "tools: get-env matches none of [get_*]".
	Why []string `json:"why"`
	// NearMiss, when set, names a pattern that missed only by case or by
	// '-', '_', '.' and spaces: the usual cause of a rule silently not
	// applying (get_* does not match get-env).
	NearMiss string `json:"near_miss,omitempty"`
	// Errors are the selector errors met (they count as a match for deny
	// and approve rules and as no match for allow rules).
	Errors []string `json:"errors,omitempty"`
}

// Explain explains how e decides c. The decision is the one Evaluate
// returns. Each rule that applies to the call's server and tool is traced
// in full, even after a check failed, so the trace shows every reason; for
// the others the trace stops at the names (their selectors are not
// evaluated, as Evaluate does not evaluate them either).
func (e *Evaluator) Explain(c Call) Explanation {
	d, _ := e.Evaluate(c)
	x := Explanation{
		Server: c.Server, Tool: c.Tool, Principal: c.Principal.ID, Groups: c.Principal.Groups,
		Revision: e.revision, Annotations: c.Annotations,
		Effect: d.Effect, Rule: d.Rule, Matched: nonNil(d.Matched), NoEligibleApprovers: d.NoEligibleApprovers, Monitor: d.Monitor,
		Default: e.p.Default, DefaultMonitored: !e.p.Enforced(),
		Rules: []RuleTrace{},
	}
	if d.Effect == Approve {
		x.Approval = explainApproval(d.Approval, d.TimeoutRule)
	}
	st := &callState{raw: c.Arguments, ann: c.Annotations}
	for i := range e.rules {
		x.Rules = append(x.Rules, e.rules[i].explain(&c, st))
	}
	if d.Effect == Deny && d.Rule == DefaultRule && len(d.Matched) > 0 {
		x.Notes = append(x.Notes, fmt.Sprintf("rules %s matched only through the strict reading of an unknown or erroring selector; "+
			"such a match never makes a decision less strict, so the default's deny stands", strings.Join(d.Matched, ", ")))
	}
	return x
}

// explain traces rule r for c, deciding whether it matches on its own
// (Explain's tests compare that with Evaluate).
func (r *crule) explain(c *Call, st *callState) RuleTrace {
	t := RuleTrace{Index: r.index, Name: r.name, Effect: r.effect, Monitored: r.monitored}
	ok := true
	fail := func() { ok = false }
	why := func(format string, args ...any) { t.Why = append(t.Why, fmt.Sprintf(format, args...)) }
	strict := r.effect != Allow
	readings := "an allow rule does not match"
	if strict {
		readings = "a" + article(r.effect) + " " + string(r.effect) + " rule matches"
	}

	switch {
	case r.serverAny:
		why("server: any server")
	case r.serverExact != "":
		if r.serverExact == c.Server {
			why("server: %s is %q", c.Server, r.serverExact)
		} else {
			why("server: %s is not %q", c.Server, r.serverExact)
			fail()
			if loose(r.serverExact) == loose(c.Server) {
				t.NearMiss = fmt.Sprintf("server %q differs from %q only in case or in '-', '_', '.' and spaces", r.serverExact, c.Server)
			}
		}
	default:
		src := r.serverSrc
		if r.serverGlob.match(c.Server) {
			why("server: %s matches %q", c.Server, src)
		} else {
			why("server: %s does not match %q", c.Server, src)
			fail()
			if g, err := compileGlob(loose(src)); err == nil && g.match(loose(c.Server)) {
				t.NearMiss = fmt.Sprintf("server pattern %q would match %q if case and '-', '_', '.' and spaces were ignored", src, c.Server)
			}
		}
	}
	sel := nameSel{any: r.toolsAny, globs: r.tools, srcs: r.toolSrcs}
	label, what := "tools", "tool"
	switch c.Kind {
	case KindResource:
		sel, label, what = r.resources, "resources", "resource"
	case KindPrompt:
		sel, label, what = r.prompts, "prompts", "prompt"
	}
	name := c.Name()
	if sel.any {
		why("%s: any %s", label, what)
	} else {
		var hit string
		for k, g := range sel.globs {
			if hit == "" && g.match(name) {
				hit = sel.srcs[k]
			}
		}
		if hit != "" {
			why("%s: %s matches %q", label, name, hit)
		} else {
			why("%s: %s matches none of [%s]", label, name, strings.Join(sel.srcs, " "))
			fail()
			for _, s := range sel.srcs {
				if g, err := compileGlob(loose(s)); err == nil && g.match(loose(name)) && t.NearMiss == "" {
					t.NearMiss = fmt.Sprintf("%s pattern %q would match %q if case and '-', '_', '.' and spaces were ignored", what, s, name)
				}
			}
		}
	}
	if !ok {
		if r.hasSelectors() {
			why("selectors not evaluated: the rule does not apply to this server and tool")
		}
		t.Matched = false
		return t
	}
	if len(r.ids) > 0 || len(r.groups) > 0 {
		who := c.Principal.ID
		if who == "" {
			who = "(no principal)"
		}
		if r.principalMatches(&c.Principal) {
			why("principals: %s is selected", who)
		} else {
			why("principals: %s (groups %v) is not among the rule's principals", who, c.Principal.Groups)
			fail()
		}
	}
	if r.annotations != nil {
		switch c.Annotations {
		case nil:
			why("annotations %s: unknown (the server is not marked trust_annotations); the strict reading: %s", r.annotations, readings)
			if !strict {
				fail()
			}
		default:
			if ok, miss := r.annotations.holds(c.Annotations); ok {
				why("annotations %s: hold", r.annotations)
			} else {
				why("annotations %s: do not hold (%s)", r.annotations, miss)
				fail()
			}
		}
	}
	if r.command != nil {
		pc, err := st.command(r.command.argument)
		switch {
		case err != nil:
			t.Errors = append(t.Errors, "command: "+err.Error())
			why("command: %v; an error never allows: %s", err, readings)
			if !strict {
				fail()
			}
		default:
			v := r.command.allows(pc)
			if strict {
				v = r.command.catches(pc)
			}
			why("command: %s", v.why)
			if !v.match {
				fail()
			}
		}
	}
	if r.when != nil {
		holds, err := r.when.eval(&activation{c: *c, st: st})
		switch {
		case err != nil:
			t.Errors = append(t.Errors, "when: "+err.Error())
			why("when %s: evaluation error (%v); an error never allows: %s", r.when.src, err, readings)
			if !strict {
				fail()
			}
		default:
			why("when %s: %v", r.when.src, holds)
			if !holds {
				fail()
			}
		}
	}
	if r.monitored {
		why("monitor mode: recorded as would_%s, does not decide", map[Effect]string{Deny: "deny", Approve: "hold"}[r.effect])
	}
	t.Matched = ok
	return t
}

// hasSelectors reports whether r has a selector besides server and tools.
func (r *crule) hasSelectors() bool {
	return len(r.ids) > 0 || len(r.groups) > 0 || r.annotations != nil || r.command != nil || r.when != nil
}

// loose folds case and the separators people mix up.
func loose(s string) string {
	return strings.NewReplacer("-", "_", ".", "_", " ", "_").Replace(strings.ToLower(s))
}
