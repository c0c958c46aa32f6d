package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/policy"
)

// clean returns s with every character that could hide or reorder text on a
// terminal, or pass for a plain space (see api.IsShownEscaped: controls
// including newlines, bidi and zero-width characters, spaces other than
// U+0020) written as a visible escape: \u202E, or \U000E0041
// above U+FFFF; invalid UTF-8 bytes as \xFF. Everything the server sends
// passes through it (or through api.EscapeJSON) before it is printed
// (case C15).
func clean(s string) string {
	s, _ = cleanCount(s)
	return s
}

// cleanCount is clean that also reports how many characters it escaped.
func cleanCount(s string) (string, int) {
	n := 0
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			fmt.Fprintf(&b, `\x%02X`, s[i])
			n++
		case !api.IsShownEscaped(r):
			b.WriteString(s[i : i+w])
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08X`, r)
			n++
		default:
			fmt.Fprintf(&b, `\u%04X`, r)
			n++
		}
		i += w
	}
	if n == 0 {
		return s, 0
	}
	return b.String(), n
}

// cleanLines is clean applied to each line of s, keeping the line breaks.
func cleanLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = clean(l)
	}
	return strings.Join(lines, "\n")
}

// writeJSON prints a JSON body as received, with hidden characters escaped.
func writeJSON(out io.Writer, body []byte) error {
	body = api.EscapeJSON(bytes.TrimRight(body, "\n"))
	_, err := fmt.Fprintf(out, "%s\n", body)
	return err
}

func decodeJSON(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}

// printApproval prints a in full for a reviewer. Display warnings come first,
// in a WARNING block, as does a notice when the CLI itself had to escape
// characters the server sent raw. now is the server's clock.
func printApproval(out io.Writer, a api.Approval, now time.Time) error {
	var body bytes.Buffer
	escaped := 0
	field := func(label, value string) {
		v, n := cleanCount(value)
		escaped += n
		fmt.Fprintf(&body, "%-20s%s\n", label+":", v)
	}
	field("Approval", a.ID)
	field("State", a.State)
	switch a.Kind {
	case "", "tool_call":
		field("Server", a.Server)
		field("Tool", a.Tool)
	case "session_policy":
		field("Kind", "session policy change (the session asks for more power)")
		field("Session", a.Target)
		field("Base revision", fmt.Sprint(a.BaseRevision))
	case "prompt_get":
		field("Kind", "prompt_get (a prompts/get)")
		field("Server", a.Server)
		field("Prompt", a.Tool)
	case "resource_read":
		field("Kind", "resource_read (a resources/read)")
		field("Server", a.Server)
		field("Resource", a.Tool)
	case "policy_change":
		field("Kind", "deployment policy change")
		field("Target", a.Target)
		field("Base revision", fmt.Sprint(a.BaseRevision))
	default:
		field("Kind", a.Kind)
		field("Target", a.Target)
	}
	field("Rule", ruleText(a))
	field("Requested by", a.RequestedBy)
	if a.OnBehalfOf != "" {
		field("On behalf of", a.OnBehalfOf)
	}
	if a.Tenant != "" {
		field("Tenant", a.Tenant)
	}
	if a.HeldAs == api.HeldAsTask {
		field("Mode", a.Mode+" (an MCP task: once approved it runs whether or not the agent is still connected)")
	} else {
		field("Mode", a.Mode)
	}
	field("Created", stamp(a.CreatedAt))
	expires := stamp(a.ExpiresAt)
	if a.State == "pending" {
		if left := expiresIn(a, now); left == "overdue" {
			expires += " (overdue)"
		} else {
			expires += " (in " + left + ")"
		}
	}
	field("Expires", expires)
	field("Required approvals", fmt.Sprintf("%d (%d so far)", max(a.RequiredApprovals, 1), approvals(a)))
	field("Approvers", approversText(a))
	if a.GrantsForbidden {
		field("Grants", "forbidden (its rule says grants: false, or the config grants.enabled: false): approve it without --grant; no grant admits such a call")
	}
	field("Arguments hash", a.ArgumentsHash)
	if a.Kind == "session_policy" || a.Kind == "policy_change" {
		body.WriteString("Proposed change:\n")
	} else {
		body.WriteString("Arguments:\n")
	}
	if text, n, ok := proposalText(a); ok {
		body.WriteString(text)
		escaped += n
	} else {
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, a.Arguments, "  ", "  "); err != nil {
			pretty.Reset()
			pretty.Write(a.Arguments)
		}
		args := api.EscapeJSONShown(pretty.Bytes())
		if !bytes.Equal(args, pretty.Bytes()) {
			escaped++
		}
		fmt.Fprintf(&body, "  %s\n", args)
	}
	if len(a.Reviews) == 0 {
		field("Reviews", "none")
	} else {
		body.WriteString("Reviews:\n")
		for _, rv := range a.Reviews {
			line := fmt.Sprintf("%s %s at %s", rv.By, rv.Verdict, stamp(rv.At))
			if rv.Reason != "" {
				line += ": " + rv.Reason
			}
			if g := rv.Grant; g != nil {
				line += " [+ grant for " + g.Duration + termsText(g.MaxUses, g.When) + "]"
			}
			v, n := cleanCount(line)
			escaped += n
			fmt.Fprintf(&body, "  - %s\n", v)
		}
	}
	if a.DecidedBy != "" {
		// Only a review decides; a later expiry or consume keeps the decision.
		verdict := "approved"
		if a.State == "denied" {
			verdict = "denied"
		}
		field("Decision", fmt.Sprintf("%s by %s at %s", verdict, a.DecidedBy, stamp(a.DecidedAt)))
	}
	if a.Reason != "" {
		field("Reason", a.Reason)
	}
	if a.State == "approved" && a.Kind != "session_policy" && a.Kind != "policy_change" {
		// Approved is not run (explain50): the dispatch re-check may
		// still invalidate it.
		runs := "the call runs when its holder " + approval.RecheckWords
		if a.Mode == "retry" { // nothing holds it until its caller re-sends it (review50)
			runs = "the call runs when its caller re-sends it and the re-check against the policy in force admits it"
		}
		field("Next", "not run yet: "+runs+" (invalidated instead if that policy denies it or requires more or other approvals than it has; expired if not taken up within valid_for)")
	}
	switch {
	case a.ConsumedAt.IsZero():
	case a.Kind == "policy_change" && a.State == "consumed":
		// Applied by the approve request itself; nothing is dispatched.
		field("Applied", fmt.Sprintf("%s, as deployment policy revision %d", stamp(a.ConsumedAt), a.BaseRevision+1))
	default:
		field("Dispatched", stamp(a.ConsumedAt))
	}
	if a.DispatchOutcome != "" {
		field("Outcome", a.DispatchOutcome)
	}
	if a.HeldBy != "" {
		// Which gateway instance has (or had) the call: with several on
		// one store, the one whose log names this id.
		held := a.HeldBy
		switch {
		case ended(a):
			// Its holder lets the claim lapse once the call has ended.
			held += " (it held the call, which has ended)"
		case a.HeldUntil.IsZero():
		case a.HeldUntil.After(now):
			held += " (its claim runs to " + stamp(a.HeldUntil) + ", renewed while it holds the call)"
		default:
			held += " (its claim ended at " + stamp(a.HeldUntil) + ")"
		}
		field("Held by", held)
	}

	var head bytes.Buffer
	// A session policy change carries what it widens among its display
	// warnings ("widens: …"): that is what approving it grants, not a
	// sign that its arguments are shown otherwise than a terminal would.
	warnings := a.DisplayWarnings
	if a.Kind == "session_policy" {
		warnings = nil
		for _, w := range a.DisplayWarnings {
			if what, ok := strings.CutPrefix(w, "widens: "); ok {
				fmt.Fprintf(&head, "NOTE: approving widens the session's policy: %s\n\n", clean(what))
			} else {
				warnings = append(warnings, w)
			}
		}
	}
	if len(warnings) > 0 || escaped > 0 {
		head.WriteString("WARNING: the arguments are not shown exactly as a terminal would render them, or the tool may read them otherwise:\n")
		for _, w := range warnings {
			fmt.Fprintf(&head, "  ! %s\n", clean(w))
		}
		if escaped > 0 {
			head.WriteString("  ! the response contained hidden or control characters; they are shown as \\u escapes\n")
		}
		head.WriteString("Hidden characters appear below as \\u escapes and secrets as [redacted: ...].\nCheck the arguments carefully before you approve.\n\n")
	}
	if _, err := out.Write(head.Bytes()); err != nil {
		return err
	}
	_, err := out.Write(body.Bytes())
	return err
}

// stamp formats t as RFC 3339 in UTC, or "-" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// ended reports whether nothing will run a's call any more: it ran (an
// outcome is recorded) or it was decided against, expired, cancelled or
// invalidated.
func ended(a api.Approval) bool {
	switch a.State {
	case "denied", "expired", "cancelled", "invalidated":
		return true
	}
	return a.DispatchOutcome != ""
}

// sessionRule is the rule a call held by its session's require_approval
// names (gate.SessionRule).
const sessionRule = "session require_approval"

// ruleText is the rule of a: a policy rule's name says that it is the
// first matching approve rule, and that the timeout, approvals and
// valid_for combine every matching one, which policy explain shows rule
// by rule (the timeout's may be another rule's).
// approversText lists a's approvers, marking the requester (who may not
// review it: the proposer of a deployment policy change is among the
// admins listed), and says so when nobody else is listed.
func approversText(a api.Approval) string {
	// The person the call acts for never reviews it, also when a group
	// (or "anyone") includes them: said, since it can leave a quorum short.
	except := ""
	if a.OnBehalfOf != "" && !slices.Contains(a.Approvers, a.OnBehalfOf) {
		except = fmt.Sprintf("; never %s, whom it acts for", a.OnBehalfOf)
	}
	if len(a.Approvers) == 0 {
		return "anyone with the approver role" + except
	}
	names := make([]string, len(a.Approvers))
	others := false
	for i, ap := range a.Approvers {
		names[i] = ap
		if approval.IsRequester(ap, a.RequestedBy, a.OnBehalfOf) {
			names[i] += " (requested it: may not review)"
		} else {
			others = true
		}
	}
	text := strings.Join(names, ", ")
	if !others {
		text += "; nobody else may review it"
	}
	return text + except
}

func ruleText(a api.Approval) string {
	switch {
	case a.Rule == "" || a.Rule == policy.DefaultRule || a.Rule == sessionRule:
		return a.Rule
	case a.Kind != "" && a.Kind != "tool_call" && a.Kind != "prompt_get" && a.Kind != "resource_read":
		return a.Rule
	}
	if a.TimeoutRule != "" {
		return a.Rule + fmt.Sprintf(" (the first matching approve rule; the timeout came from rule %q; the approvals and valid_for are the strictest of all the matching approve rules: policy explain names them)", a.TimeoutRule)
	}
	return a.Rule + " (the first matching approve rule; the timeout, approvals and valid_for are the strictest of all the matching approve rules: policy explain names them)"
}

// proposalText is the arguments of a deployment policy change (kind
// policy_change: {"base_revision", "policy", "digest", "diff", "widens"})
// as a reviewer reads them: what it widens, the changes, and the proposed
// policy as YAML lines, each indented and cleaned, with the number of
// characters escaped. ok is false for any other kind or shape, which is
// shown as JSON. As JSON, the policy was one string of "\n"s, and "<" and
// ">" of its conditions read \u003c and \u003e.
func proposalText(a api.Approval) (text string, escaped int, ok bool) {
	if a.Kind != "policy_change" {
		return "", 0, false
	}
	var p struct {
		BaseRevision int64    `json:"base_revision"`
		Policy       string   `json:"policy"`
		Diff         []string `json:"diff"`
		Widens       []string `json:"widens"`
	}
	if err := json.Unmarshal(a.Arguments, &p); err != nil || p.Policy == "" {
		return "", 0, false
	}
	var b strings.Builder
	line := func(indent, s string) {
		v, n := cleanCount(s)
		escaped += n
		b.WriteString(indent + v + "\n")
	}
	if len(p.Widens) > 0 {
		b.WriteString("  Widens (approving allows this):\n")
		for _, w := range p.Widens {
			line("    - ", w)
		}
	}
	fmt.Fprintf(&b, "  Changes from revision %d:\n", p.BaseRevision)
	for _, d := range p.Diff {
		line("    - ", d)
	}
	fmt.Fprintf(&b, "  Policy (revision %d once applied):\n", p.BaseRevision+1)
	for _, l := range strings.Split(strings.TrimRight(p.Policy, "\n"), "\n") {
		line("    ", l)
	}
	return b.String(), escaped, true
}
