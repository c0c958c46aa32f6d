package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/policy"
)

const grantsUsageText = `Usage: toolgate grants <command> [flags]

A grant remembers an approval: "allow this principal to call this server's
tool, for arguments matching a condition, for D, at most N times". It is
made by approving with --grant ("toolgate approvals approve <id> --grant 1h
[--grant-uses N] [--grant-when CEL]") and only ever stands in for an
approval: deny rules, session exclusions and policy changes that stop asking
for approval win over it.

Commands:
  list [--all] [--principal P] [--server S] [--tool T] [--limit N] [--cursor C]
        List grants: active ones (default), or all (expired, used up, revoked).
  show <id>
        Show one grant in full, with its latest uses.
  revoke <id> [--reason R]
        Revoke a grant. Once this returns, no gateway instance lets it allow
        another call.

Flags for every command (before or after the arguments):
  --addr A    admin API address (default $TOOLGATE_ADDR, else ` + DefaultAddr + `)
  --token T   bearer token (default $TOOLGATE_TOKEN; required; revoking
              needs the approver or admin role)
  --json      print the server's JSON instead of text

<id> is a full grant id, or a prefix or suffix of at least 6 characters that
matches exactly one grant (grants made close together share their first
characters; their last ones differ).

Exit status: 0 ok, 1 failure (including errors from the server), 2 usage.
`

// GrantsUsage writes the help text of `toolgate grants` to w.
func GrantsUsage(w io.Writer) { _, _ = io.WriteString(w, grantsUsageText) }

type grantOptions struct {
	conn
	all                     bool
	principal, server, tool string
	limit                   int
	cursor                  string
	reason                  string
}

// grantCommands are the commands of `toolgate grants`.
var grantCommands = group[grantOptions]{
	name:  "grants",
	want:  "list, show or revoke",
	usage: GrantsUsage,
	conn:  func(o *grantOptions) *conn { return &o.conn },
	check: func(name string, o *grantOptions) error {
		if name == "list" && (o.limit < 1 || o.limit > 1000) {
			return usagef("list --limit %d: want 1 to 1000", o.limit)
		}
		return nil
	},
	commands: map[string]subcommand[grantOptions]{
		"list": {
			synopsis: "list [--all] [--principal P] [--server S] [--tool T] [--limit N] [--cursor C]",
			flags: func(fs *flag.FlagSet, o *grantOptions) {
				fs.BoolVar(&o.all, "all", false, "also list expired, used-up and revoked grants")
				fs.StringVar(&o.principal, "principal", "", "only grants of this principal")
				fs.StringVar(&o.server, "server", "", "only grants for this server")
				fs.StringVar(&o.tool, "tool", "", "only grants for this tool")
				fs.IntVar(&o.limit, "limit", 50, "page size, 1 to 1000")
				fs.StringVar(&o.cursor, "cursor", "", "next_cursor of the previous page")
			},
			run: runGrantList,
		},
		"show": {synopsis: "show <id>", args: 1, run: runGrantShow},
		"revoke": {
			synopsis: "revoke <id> [--reason R]",
			args:     1,
			flags: func(fs *flag.FlagSet, o *grantOptions) {
				fs.StringVar(&o.reason, "reason", "", "why you revoke it (recorded)")
			},
			run: runGrantRevoke,
		},
	},
}

// RunGrants runs `toolgate grants` with args (the words after "grants"),
// like Run: results to stdout, errors to stderr, and ExitOK, ExitFailure or
// ExitUsage.
func RunGrants(ctx context.Context, args []string, stdout, stderr io.Writer, env func(string) string) int {
	return grantCommands.Run(ctx, args, stdout, stderr, env)
}

func runGrantList(ctx context.Context, c *client, o *grantOptions, _ []string, out io.Writer) error {
	q := url.Values{"state": {"active"}, "limit": {strconv.Itoa(o.limit)}}
	if o.all {
		q.Set("state", "all")
	}
	for k, v := range map[string]string{"principal": o.principal, "server": o.server, "tool": o.tool, "cursor": o.cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var l api.GrantList
	resp, err := c.get(ctx, "/v1/grants?"+q.Encode(), &l)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, resp.body)
	}
	if len(l.Grants) == 0 {
		what := "active grants"
		if o.all {
			what = "grants"
		}
		_, err := fmt.Fprintf(out, "no %s\n", what)
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	// As in approvals list, a failed write of the table shows at Flush.
	_, _ = fmt.Fprintln(tw, "ID\tSTATE\tPRINCIPAL\tSERVER\tTOOL\tUSES\tEXPIRES IN\tWHEN")
	for _, g := range l.Grants {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(g.ID), clean(g.State), clean(g.Principal), clean(g.Server), clean(g.Tool),
			usesText(g), grantExpiresIn(g, resp.now), clean(whenText(g.When)))
	}
	if l.NextCursor != "" {
		_, _ = fmt.Fprintf(tw, "\nmore: toolgate grants list --limit %d --cursor %s\n", o.limit, clean(l.NextCursor))
	}
	return tw.Flush()
}

func usesText(g api.Grant) string {
	if g.MaxUses == 0 {
		return strconv.FormatInt(g.Uses, 10)
	}
	return fmt.Sprintf("%d/%d", g.Uses, g.MaxUses)
}

// grantExpiresIn is the time left of an active grant by the server's
// clock; "-" otherwise.
func grantExpiresIn(g api.Grant, now time.Time) string {
	if g.State != "active" {
		return "-"
	}
	return g.ExpiresAt.Sub(now).Round(time.Second).String()
}

func runGrantShow(ctx context.Context, c *client, o *grantOptions, args []string, out io.Writer) error {
	id, err := resolveGrantID(ctx, c, args[0])
	if err != nil {
		return err
	}
	var g api.Grant
	resp, err := c.get(ctx, "/v1/grants/"+id, &g)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, resp.body)
	}
	return printGrant(out, g)
}

func runGrantRevoke(ctx context.Context, c *client, o *grantOptions, args []string, out io.Writer) error {
	id, err := resolveGrantID(ctx, c, args[0])
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/grants/"+id+"/revoke", api.RevokeBody{Reason: o.reason})
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(out, resp.body)
	}
	var g api.Grant
	if err := decodeJSON(resp.body, &g); err != nil {
		return fmt.Errorf("revoke %s: %w", id, err)
	}
	_, err = fmt.Fprintf(out, "%s: revoked by %s at %s (used %s)\n", clean(g.ID), clean(g.RevokedBy), stamp(g.RevokedAt), usesText(g))
	return err
}

// grantSummary says in one line what a grant allows, naming the tool as
// "server · tool" as every other surface does (list, show, watch, the
// inbox, Slack), never the agent-facing "<server>__<tool>" alias.
func grantSummary(g api.Grant) string {
	if policy.GrantAdmitsAnyArguments(g.When) {
		// No predicate, or one always true (--grant-when true): say what
		// that admits (newuser50's 50,000 EUR refund).
		return fmt.Sprintf("%s may call %s · %s with any arguments until %s%s", clean(g.Principal), clean(g.Server), clean(g.Tool), stamp(g.ExpiresAt), termsText(g.MaxUses, g.When))
	}
	return fmt.Sprintf("%s may call %s · %s until %s%s", clean(g.Principal), clean(g.Server), clean(g.Tool), stamp(g.ExpiresAt), termsText(g.MaxUses, g.When))
}

// whenText is a grant's predicate as list and show print it: "(any
// arguments)" for none, and the predicate followed by "(any arguments)"
// for one that is always true.
func whenText(when string) string {
	switch {
	case when == "":
		return "(any arguments)"
	case policy.GrantAdmitsAnyArguments(when):
		return when + " (any arguments)"
	}
	return when
}

// termsText is the use cap and predicate of grant terms, as a suffix.
func termsText(maxUses int64, when string) string {
	var s string
	if maxUses > 0 {
		s += fmt.Sprintf(", at most %d times", maxUses)
	}
	if when != "" {
		s += ", when " + clean(when)
	}
	return s
}

func printGrant(out io.Writer, g api.Grant) error {
	var b strings.Builder
	field := func(label, value string) { fmt.Fprintf(&b, "%-18s%s\n", label+":", clean(value)) }
	field("Grant", g.ID)
	field("State", g.State)
	field("Principal", g.Principal)
	if g.OnBehalfOf != "" {
		field("On behalf of", g.OnBehalfOf)
	}
	if g.Tenant != "" {
		field("Tenant", g.Tenant)
	}
	field("Server", g.Server)
	field("Tool", g.Tool)
	field("When", whenText(g.When))
	field("Created", stamp(g.CreatedAt))
	field("Expires", stamp(g.ExpiresAt))
	max := "no cap"
	if g.MaxUses > 0 {
		max = strconv.FormatInt(g.MaxUses, 10)
	}
	field("Uses", fmt.Sprintf("%d (max: %s)", g.Uses, max))
	var by []string
	for _, a := range g.ApprovedBy {
		by = append(by, a.ID)
	}
	field("Approved by", fmt.Sprintf("%s (quorum %d)", strings.Join(by, ", "), g.Approvals))
	if g.Reason != "" {
		field("Reason", g.Reason)
	}
	field("Source approval", g.SourceApproval)
	field("Rule", g.Rule)
	if !g.RevokedAt.IsZero() {
		r := fmt.Sprintf("%s by %s", stamp(g.RevokedAt), g.RevokedBy)
		if g.RevokeReason != "" {
			r += ": " + g.RevokeReason
		}
		field("Revoked", r)
	}
	if len(g.RecentUses) > 0 {
		b.WriteString("Recent uses:\n")
		for _, u := range g.RecentUses {
			who := u.Principal
			if u.Session != "" {
				who += " (session " + u.Session + ")"
			}
			fmt.Fprintf(&b, "  #%d at %s by %s, arguments %s\n", u.N, stamp(u.At), clean(who), clean(u.ArgumentsHash))
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// resolveGrantID turns a full grant id, or a unique prefix or suffix of at
// least minPrefix characters, into a full id.
func resolveGrantID(ctx context.Context, c *client, arg string) (string, error) {
	return resolveShortID(ctx, c, "grant", "/v1/grants", arg, func(ctx context.Context, u string) ([]string, []string, bool, error) {
		var l api.GrantList
		if _, err := c.get(ctx, u, &l); err != nil {
			return nil, nil, false, err
		}
		var ids, lines []string
		for _, g := range l.Grants {
			ids = append(ids, g.ID)
			lines = append(lines, fmt.Sprintf("%s  %s  %s · %s", clean(g.ID), clean(g.State), clean(g.Server), clean(g.Tool)))
		}
		return ids, lines, l.NextCursor != "", nil
	})
}
