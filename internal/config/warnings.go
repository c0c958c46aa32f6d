package config

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"toolgate/internal/policy"
)

// Warnings lists configurations that are valid but probably not what was
// meant; serve logs them and `toolgate policy check` prints them, and
// neither fails. They are warnings rather than errors because a reviewer
// set can be completed later (or minted by serve --dev) without touching
// the policy:
//
//   - a glob server pattern in a rule that matches no configured server;
//   - a rule tool glob written as an exposed name, "<server>__<tool>" of a
//     configured server: rules match the real tool name, so it matches
//     nothing of that server (a deny rule that silently does not deny);
//   - with no approvers configured while the policy can require approval:
//     nobody can decide, and held calls can only expire;
//   - an approvers entry (policy default or rule) naming an id or
//     "group:<name>" that no configured approver with role approver or
//     admin has;
//   - an approval needing more approvals than there are distinct configured
//     approvers it could come from, also once a configured agent's own id
//     and the person it acts for (on_behalf_of), who may not review its
//     calls, are left out (selfReviewWarnings);
//   - anything in monitor mode (policy.enforce: false, monitor: true): calls
//     it would deny or hold proceed;
//   - a rule selecting annotations of a named server that is not marked
//     trust_annotations (the selector then takes the strictest reading for
//     every tool of that server);
//   - an admin listener on a TCP address other than loopback while
//     approvals.public_url is not https: approver tokens and inbox cookies
//     would cross the network in clear text (adminExposed).
//
// Intersections between overlapping approve rules depend on the tools an
// upstream lists, so they are judged per call (policy.Decision's
// NoEligibleApprovers), not here.
func (c Config) Warnings() []string {
	var warns []string
	warn := func(format string, args ...any) { warns = append(warns, fmt.Sprintf(format, args...)) }
	p := &c.Policy

	if w := c.adminExposed(); w != "" {
		warns = append(warns, w)
	}

	for i, r := range p.Rules {
		if r.Server == "" || !policy.IsGlob(r.Server) {
			continue
		}
		hit := false
		for name := range c.Servers {
			if ok, err := policy.Match(r.Server, name); err == nil && ok {
				hit = true
				break
			}
		}
		if !hit {
			warn("policy.%s: server pattern %q matches no configured server", ruleLabel(p, i), r.Server)
		}
	}

	servers := slices.Sorted(func(yield func(string) bool) {
		for n := range c.Servers {
			if !yield(n) {
				return
			}
		}
	})
	for i, r := range p.Rules {
		for j, g := range r.Tools {
			for _, s := range servers {
				if real, ok := strings.CutPrefix(g, s+"__"); ok && real != "" {
					warn("policy.%s: tools[%d] %q is the name agents see for server %q's tool; rules match the real tool name (%q), so this one matches nothing of %q",
						ruleLabel(p, i), j, g, s, real, s)
					break
				}
			}
		}
	}

	for _, m := range p.InMonitorMode() {
		warn("policy in monitor mode: %s; calls it would deny or hold proceed (recorded as would_deny / would_hold)", m)
	}
	for i, r := range p.Rules {
		if r.Annotations == nil || r.Server == "" || policy.IsGlob(r.Server) {
			continue
		}
		if s, ok := c.Servers[r.Server]; ok && !s.TrustAnnotations {
			warn("policy.%s: selects annotations of server %q, which is not marked trust_annotations: every tool of it counts as unknown (an allow rule never matches, a deny or approve rule always does)", ruleLabel(p, i), r.Server)
		}
	}
	warns = append(warns, c.notifyWarnings()...)

	canApprove := p.Default == policy.Approve || slices.ContainsFunc(p.Rules, func(r policy.Rule) bool { return r.Effect == policy.Approve })
	if !canApprove {
		return warns
	}
	var reviewers []Approver
	for _, a := range c.Approvers {
		if slices.Contains(a.Roles, RoleApprover) || slices.Contains(a.Roles, RoleAdmin) {
			reviewers = append(reviewers, a)
		}
	}
	if len(reviewers) == 0 {
		warn("no approver has role approver or admin, but the policy can require approval: such calls can only expire (serve --dev mints tokens for testing)")
		return warns
	}

	// eligible returns the ids of reviewers an approvers list admits, and
	// warns about entries that admit nobody.
	eligible := func(where string, list []string) []string {
		if len(list) == 0 {
			ids := make([]string, len(reviewers))
			for i, r := range reviewers {
				ids[i] = r.ID
			}
			return ids
		}
		var ids []string
		for _, entry := range list {
			found := false
			for _, r := range reviewers {
				g, isGroup := strings.CutPrefix(entry, policy.GroupPrefix)
				if (isGroup && slices.Contains(r.Groups, g)) || (!isGroup && r.ID == entry) {
					found = true
					if !slices.Contains(ids, r.ID) {
						ids = append(ids, r.ID)
					}
				}
			}
			if !found {
				warn("%s.approvers: %q matches no configured approver with role approver or admin", where, entry)
			}
		}
		return ids
	}
	// check checks one approval; agents is whether its calls can come from
	// the configured agents principals selects (nil: any), so that an
	// agent acting for one of its approvers is checked too.
	check := func(where string, a policy.Approval, agents bool, principals []string) {
		ids := eligible(where, a.Approvers)
		switch {
		case len(ids) == 0 && len(a.Approvers) > 0:
			warn("%s: nobody configured can review these approvals", where)
		case len(ids) < a.Approvals:
			warn("%s: needs %d approvals but only %d configured approver(s) are eligible", where, a.Approvals, len(ids))
		case agents:
			c.selfReviewWarnings(where, a.Approvals, ids, principals, warn)
		}
	}
	// policy.approval decides the default's approvals and those of approve
	// rules that set no approvals or approvers of their own: the callers
	// are anyone's when the default approves or such a rule names no
	// principals, else those rules' principals.
	inherited, anyone := false, p.Default == policy.Approve
	var inheritors []string
	for _, r := range p.Rules {
		if r.Effect == policy.Approve && (r.Approval == nil || (r.Approval.Approvals == 0 && len(r.Approval.Approvers) == 0)) {
			inherited = true
			anyone = anyone || len(r.Principals) == 0
			inheritors = append(inheritors, r.Principals...)
		}
	}
	if anyone {
		inheritors = nil
	}
	check("policy.approval", p.Approval, anyone || inherited, inheritors)
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.Effect != policy.Approve {
			continue
		}
		o := r.Approval
		if o == nil || (o.Approvals == 0 && len(o.Approvers) == 0) {
			continue // inherits what policy.approval was checked for
		}
		a := p.Approval
		if o.Approvals != 0 {
			a.Approvals = o.Approvals
		}
		if len(o.Approvers) > 0 {
			a.Approvers = o.Approvers
		}
		check(fmt.Sprintf("policy.%s.approval", ruleLabel(p, i)), a, true, r.Principals)
	}
	return warns
}

// selfReviewWarnings warns, for an approval needing need approvals from the
// reviewers ids, about each configured agent the approval may apply to
// (principals: the rule's principals, nil for any) that is itself one of
// ids or acts for one of them (on_behalf_of): neither may review the
// agent's calls, so when that leaves fewer than need, the gate refuses
// each call of the agent the approval would hold. Sessions created at run time with an
// on_behalf_of are not known here: the gate warns about them when they
// are created (gate.Gate.SessionWarnings), and refuses such a call when
// it is made (code quorum_unreachable).
func (c Config) selfReviewWarnings(where string, need int, ids, principals []string, warn func(string, ...any)) {
	for i, ag := range c.Agents {
		if !principalsAdmit(principals, ag) {
			continue
		}
		left := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == ag.ID || id == ag.OnBehalfOf })
		if len(left) >= need {
			continue
		}
		warn("%s: needs %d approvals but agents[%d] %q acts for %q, who may not review its calls: only %d of the %d eligible approver(s) can, so each call it would hold is refused at once (code quorum_unreachable; nothing is held or run): add an approver it does not act for, or lower approvals",
			where, need, i, ag.ID, ag.OnBehalfOf, len(left), len(ids))
	}
}

// principalsAdmit reports whether a rule's principals list (ids and
// "group:<name>"; empty: anyone) selects the agent ag.
func principalsAdmit(principals []string, ag Agent) bool {
	if len(principals) == 0 {
		return true
	}
	for _, p := range principals {
		if g, isGroup := strings.CutPrefix(p, policy.GroupPrefix); isGroup && slices.Contains(ag.Groups, g) || !isGroup && p == ag.ID {
			return true
		}
	}
	return false
}

// Unreviewable lists the approvals of the policy (the default, when it is
// approve, and each approve rule) that no configured approver could review:
// no approver with role approver or admin is named by the approvers list, or
// none exists. extra adds approvers that are not in the file (serve --dev
// mints one). serve refuses to start when the list is not empty, unless
// approvals.allow_no_approvers is true.
func (c Config) Unreviewable(extra ...Approver) []string {
	p := &c.Policy
	var reviewers []Approver
	for _, a := range append(slices.Clone(c.Approvers), extra...) {
		if slices.Contains(a.Roles, RoleApprover) || slices.Contains(a.Roles, RoleAdmin) {
			reviewers = append(reviewers, a)
		}
	}
	admits := func(list []string) bool {
		for _, r := range reviewers {
			if len(list) == 0 {
				return true
			}
			for _, entry := range list {
				g, isGroup := strings.CutPrefix(entry, policy.GroupPrefix)
				if (isGroup && slices.Contains(r.Groups, g)) || (!isGroup && r.ID == entry) {
					return true
				}
			}
		}
		return false
	}
	var out []string
	if p.Default == policy.Approve && !admits(p.Approval.Approvers) {
		out = append(out, "policy.default (approve)")
	}
	for i, r := range p.Rules {
		if r.Effect != policy.Approve {
			continue
		}
		list := p.Approval.Approvers
		if r.Approval != nil && len(r.Approval.Approvers) > 0 {
			list = r.Approval.Approvers
		}
		if !admits(list) {
			out = append(out, "policy."+ruleLabel(p, i))
		}
	}
	return out
}

// adminExposed is the warning for listen.admin on a TCP address that is not
// loopback (a named host other than localhost counts as not loopback: it
// may resolve to anything) while approvals.public_url is not an https URL,
// so nothing says a TLS proxy is in front: the CLI's, REST clients' and the
// inbox's approver tokens and session cookies would cross the network in
// clear text. "" otherwise (loopback, a Unix socket, no admin listener).
func (c Config) adminExposed() string {
	addr := c.Listen.Admin
	if addr == "" || strings.HasPrefix(addr, "unix://") || isHTTPS(c.Approvals.PublicURL) {
		return ""
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "" // Validate's problem
	}
	if host == "localhost" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return ""
	}
	if host == "" {
		host = "every interface"
	}
	return fmt.Sprintf("listen.admin %q listens on %s without TLS: approver tokens and inbox cookies cross the network in clear text; "+
		"bind it to 127.0.0.1 or a unix:// socket and put a TLS reverse proxy in front (then set approvals.public_url to its https:// address; docs/deploy.md)", addr, host)
}

// isHTTPS reports whether u is an https URL; a URL's scheme is case
// insensitive (RFC 3986), and the inbox's Secure cookie reads
// "HTTPS://…" as https too (url.Parse lowers the scheme).
func isHTTPS(u string) bool {
	return len(u) >= len("https://") && strings.EqualFold(u[:len("https://")], "https://")
}
