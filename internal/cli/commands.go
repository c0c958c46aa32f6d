package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
)

// minPrefix is the shortest id prefix accepted (DESIGN "CLI").
const minPrefix = 6

// maxMatches is how many matches of an ambiguous prefix are listed.
const maxMatches = 10

func runList(ctx context.Context, c *client, o *options, _ []string, out io.Writer) error {
	q := url.Values{}
	q.Set("state", o.state)
	q.Set("limit", strconv.Itoa(o.limit))
	order, more := "newest", ""
	if o.oldest {
		order, more = "oldest", " --oldest"
	}
	q.Set("order", order)
	if o.cursor != "" {
		q.Set("cursor", o.cursor)
	}
	var l api.List
	resp, err := c.get(ctx, "/v1/approvals?"+q.Encode(), &l)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, resp.body)
	}
	if len(l.Approvals) == 0 {
		_, err := fmt.Fprintf(out, "no approvals (state: %s)\n", clean(o.state))
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSERVER\tTOOL\tREQUESTED BY\tEXPIRES IN\tARGUMENTS")
	for _, a := range l.Approvals {
		by := a.RequestedBy
		if a.OnBehalfOf != "" {
			by += " for " + a.OnBehalfOf
		}
		server, tool := subject(a)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(a.ID), listState(a), clean(server), clean(tool), clean(by), expiresIn(a, resp.now), listArgs(a))
	}
	if l.NextCursor != "" {
		fmt.Fprintf(tw, "\nmore: toolgate approvals list --state %s --limit %d%s --cursor %s\n", clean(o.state), o.limit, more, clean(l.NextCursor))
	}
	return tw.Flush()
}

// listState is the list's state column: the state, and for a pending
// request needing more than one approval its progress, "pending 1/2"
// (approving reviews of required_approvals), which the list did not show.
func listState(a api.Approval) string {
	if a.State != "pending" || a.RequiredApprovals <= 1 {
		return clean(a.State)
	}
	n := 0
	for _, rv := range a.Reviews {
		if rv.Verdict == "approve" {
			n++
		}
	}
	return fmt.Sprintf("%s %d/%d", clean(a.State), n, a.RequiredApprovals)
}

// listArgsWidth is how many characters of the arguments a list line shows.
const listArgsWidth = 60

// listArgs is the list's arguments column: the display copy on one line,
// cut at listArgsWidth, after "! " when show would open with display
// warnings (hidden characters, redactions) or, for a session policy
// change, with what it widens. It tells apart calls of one
// tool; what to approve is read in full with show (or pinned with --hash).
func listArgs(a api.Approval) string {
	s := argsCut(a.Arguments, listArgsWidth)
	if len(a.DisplayWarnings) > 0 {
		s = "! " + s
	}
	return s
}

// expiresIn is the time left before a pending request expires, as seen by
// the server's clock; "-" for other states.
func expiresIn(a api.Approval, now time.Time) string {
	if a.State != "pending" {
		return "-"
	}
	left := a.ExpiresAt.Sub(now)
	if left <= 0 {
		return "overdue"
	}
	return left.Round(time.Second).String()
}

func runShow(ctx context.Context, c *client, o *options, args []string, out io.Writer) error {
	id, err := resolveID(ctx, c, args[0])
	if err != nil {
		return err
	}
	var a api.Approval
	resp, err := c.get(ctx, "/v1/approvals/"+id, &a)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, resp.body)
	}
	return printApproval(out, a, resp.now)
}

func runApprove(ctx context.Context, c *client, o *options, args []string, out io.Writer) error {
	body := api.ApproveBody{Reason: o.reason, ArgumentsHash: o.hash}
	if o.grantSet["grant"] {
		body.Grant = &api.GrantBody{Duration: o.grant.String(), MaxUses: o.grantUses, When: o.grantWhen}
	}
	return review(ctx, c, o, args[0], "approve", body, out)
}

func runDeny(ctx context.Context, c *client, o *options, args []string, out io.Writer) error {
	return review(ctx, c, o, args[0], "deny", api.DenyBody{Reason: o.reason}, out)
}

func review(ctx context.Context, c *client, o *options, arg, verb string, body any, out io.Writer) error {
	id, err := resolveID(ctx, c, arg)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/approvals/"+id+"/"+verb, body)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, resp.body)
	}
	var a api.Approval
	if err := decodeJSON(resp.body, &a); err != nil {
		return fmt.Errorf("%s %s: %w", verb, id, err)
	}
	if a.Duplicate {
		_, err := fmt.Fprintf(out, "%s: %s\n", clean(a.ID), duplicateSummary(a, verb, o.grantSet["grant"]))
		return err
	}
	if _, err := fmt.Fprintf(out, "%s: %s recorded; %s\n", clean(a.ID), verb, stateSummary(a)); err != nil {
		return err
	}
	switch {
	case a.Grant != nil:
		_, err = fmt.Fprintf(out, "grant %s: %s\n", clean(a.Grant.ID), grantSummary(*a.Grant))
	case o.grantSet["grant"] && a.State == "pending":
		_, err = fmt.Fprintf(out, "grant terms recorded; the grant is made when %d approvers have attached the same terms\n", max(a.RequiredApprovals, 1))
	case o.grantSet["grant"]:
		_, err = fmt.Fprintf(out, "no grant was made (approval is %s)\n", clean(a.State))
	}
	return err
}

// duplicateSummary says that a review repeating the reviewer's earlier
// verdict recorded nothing: the verdict (for a deny, with the reason) that
// stands and where the request stands. withTerms says grant terms were
// given, which were not kept either.
func duplicateSummary(a api.Approval, verb string, withTerms bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s not recorded: you had given this verdict already", verb)
	if verb == "deny" {
		// A deny settles the request, so it has one deny: the caller's.
		for _, rv := range a.Reviews {
			if rv.Verdict == "deny" {
				fmt.Fprintf(&b, " (at %s, reason %q)", stamp(rv.At), clean(rv.Reason))
				break
			}
		}
	}
	if withTerms {
		b.WriteString("; the grant terms were not recorded either")
	}
	b.WriteString("; ")
	switch a.State {
	case "pending":
		fmt.Fprintf(&b, "still pending, %d of %d approvals", approvals(a), max(a.RequiredApprovals, 1))
	case "approved", "denied":
		fmt.Fprintf(&b, "it is %s (decided by %s)", a.State, clean(a.DecidedBy))
	case "consumed", "invalidated":
		if a.Kind == "" {
			// "approved (decided by …) and dispatched; outcome …", as
			// the review that decided it was told.
			b.WriteString("it was " + stateSummary(a))
			break
		}
		fallthrough
	default:
		b.WriteString("state " + clean(a.State))
	}
	return b.String()
}

// stateSummary says where a request stands after a review, as the API
// answered it, and no more. An approved call has not run: it runs only if
// its holder's re-check against the policy in force admits it (the
// policy may deny it since, the approval may lapse), and only if its
// caller is still there to take it (hold) or re-sends it (retry), which
// the answer cannot tell, except a call held as an MCP task (held_as
// "task"), which runs whether or not its agent is still connected;
// `approvals show` later says what became of it. A consume in the
// review's own transaction shows as consumed (dispatched; for a
// deployment policy change, applied) or invalidated (not run).
func stateSummary(a api.Approval) string {
	by := clean(a.DecidedBy)
	switch a.State {
	case "pending":
		return fmt.Sprintf("still pending, %d of %d approvals", approvals(a), max(a.RequiredApprovals, 1))
	case "approved":
		approved := fmt.Sprintf("now approved (%d of %d, decided by %s)", approvals(a), max(a.RequiredApprovals, 1), by)
		switch {
		case a.Kind != "":
			return approved
		case a.Mode == "retry":
			return approved + "; the call runs when its caller re-sends it, if the re-check against the policy in force admits it" + showLater
		case a.HeldAs == api.HeldAsTask:
			return approved + "; held as an MCP task, the call runs when its holder " + approval.RecheckWords + ", whether or not the agent is still connected (the agent reads the result with tasks/get)" + showLater
		}
		// A caller that went away can still take it up: an identical
		// re-send from the same principal picks up an approved request
		// whose holder is gone (until valid_for ends).
		return approved + "; the call runs when its holder " + approval.RecheckWords + ", if its caller is still waiting or re-sends it" + showLater
	case "denied":
		return fmt.Sprintf("now denied (decided by %s)", by)
	case "consumed":
		if a.Kind == "policy_change" {
			// The approve request applied it in its own transaction
			// (docs/policy.md, "Approving"): base_revision+1 is the new
			// revision. Nothing is dispatched.
			return fmt.Sprintf("now approved (decided by %s) and applied: the deployment policy is revision %d", by, a.BaseRevision+1)
		}
		if a.DispatchOutcome == "" {
			return fmt.Sprintf("approved (decided by %s) and dispatched; no outcome recorded yet", by)
		}
		return fmt.Sprintf("approved (decided by %s) and dispatched; outcome %s", by, clean(a.DispatchOutcome))
	case "invalidated":
		return fmt.Sprintf("approved (decided by %s), then invalidated: the call did not run (%s)", by, clean(a.Reason))
	}
	return "state " + clean(a.State)
}

// showLater points from an approve's answer to where its outcome is told.
const showLater = "; approvals show says what became of it"

func approvals(a api.Approval) int {
	n := 0
	for _, rv := range a.Reviews {
		if rv.Verdict == "approve" {
			n++
		}
	}
	return n
}

// resolveID turns a full id, or a unique prefix or suffix of at least
// minPrefix characters, into a full id. A too short or malformed id is a
// usage error; no match or several matches are failures, the latter
// listing the matches. Suffixes matter because ids made close together
// share their first characters (UUIDv7) while their ends are random.
func resolveID(ctx context.Context, c *client, arg string) (string, error) {
	return resolveShortID(ctx, c, "approval", "/v1/approvals", arg, func(ctx context.Context, u string) ([]string, []string, bool, error) {
		var l api.List
		if _, err := c.get(ctx, u, &l); err != nil {
			return nil, nil, false, err
		}
		var ids, lines []string
		for _, a := range l.Approvals {
			ids = append(ids, a.ID)
			lines = append(lines, fmt.Sprintf("%s  %s  %s", clean(a.ID), clean(a.State), subjectLine(a)))
		}
		return ids, lines, l.NextCursor != "", nil
	})
}

// isUUID reports whether s is lower-case 8-4-4-4-12 hex.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
