package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"toolgate/internal/api"
	"toolgate/internal/approval"
)

// row is one approval as a list (inbox or history) shows it.
type row struct {
	ID, ShortID  string
	State        string
	Subject      string // "server · tool", or what a policy approval changes
	Server, Tool string
	Kind         string // "" for a tool call, else a label
	Summary      string // one line of arguments, hidden characters made visible
	Whole        bool   // Summary shows every value: the list may approve it (bulk)
	Requester    string
	OnBehalfOf   string
	Rule         string
	Hash         string
	CreatedAt    string // RFC 3339 UTC
	Created      string // for people
	Age          string // how long ago it was requested (app.js keeps it current)
	ExpiresAt    string // RFC 3339 UTC, for the countdown
	Expires      string // for people
	TimeLeft     string // the first text of the countdown
	Urgent       bool   // less than a minute left
	Approved     int
	Required     int
	Eligible     bool
	NotEligible  string // why this approver may not review, when not Eligible
	Warnings     int
	Outcome      string // history: what became of it
	DecidedBy    string
	Decided      string
}

// newRow builds the list view of a for c at now.
func newRow(a api.Approval, c api.Caller, now time.Time) row {
	r := row{
		ID:         a.ID,
		ShortID:    shortID(a.ID),
		State:      a.State,
		Server:     visible(a.Server),
		Tool:       visible(a.Tool),
		Requester:  visible(a.RequestedBy),
		OnBehalfOf: visible(a.OnBehalfOf),
		Rule:       visible(a.Rule),
		Hash:       a.ArgumentsHash,
		CreatedAt:  stamp(a.CreatedAt),
		Created:    human(a.CreatedAt),
		ExpiresAt:  stamp(a.ExpiresAt),
		Expires:    human(a.ExpiresAt),
		Approved:   approvals(a),
		Required:   max(a.RequiredApprovals, 1),
		Warnings:   len(a.DisplayWarnings),
		DecidedBy:  visible(a.DecidedBy),
		Decided:    human(a.DecidedAt),
	}
	r.Summary, r.Whole = summarizeWhole(a.Arguments, summaryLen)
	r.Kind, r.Subject = subject(a)
	r.Age = age(now.Sub(a.CreatedAt))
	left := a.ExpiresAt.Sub(now)
	r.TimeLeft, r.Urgent = timeLeft(left), left < time.Minute
	if err := c.Eligible(a); err != nil {
		r.NotEligible = notEligible(err)
	} else {
		r.Eligible = true
	}
	r.Outcome = outcome(a)
	return r
}

// subject names what a asks for: a kind label ("" for a tool call) and a
// title.
func subject(a api.Approval) (kind, title string) {
	switch a.Kind {
	case "", "tool_call":
		return "", visible(a.Server) + " · " + visible(a.Tool)
	case "session_policy":
		return "session policy", "session " + shortID(a.Target) + " asks for more"
	case "policy_change":
		return "policy change", "deployment policy change"
	case "prompt_get": // Tool is the prompt's real name; Target is empty
		return "prompt", visible(a.Server) + " · " + visible(a.Tool)
	case "resource_read": // Tool is the resource's real URI
		return "resource", visible(a.Server) + " · " + visible(a.Tool)
	}
	return visible(a.Kind), visible(a.Kind) + " " + visible(a.Target)
}

// notEligible says why a caller may not review, for people.
func notEligible(err error) string {
	switch {
	case errors.Is(err, api.ErrNoReviewRole):
		return "your role only reads"
	case errors.Is(err, approval.ErrSelfReview):
		return "you requested it (or it acts for you)"
	case errors.Is(err, approval.ErrNotEligible):
		return "you are not among its approvers"
	case errors.Is(err, approval.ErrDuplicate):
		return "you already reviewed it"
	}
	return "you cannot review it"
}

// runsWhen says when an approved call runs, after "the call ": a call in retry mode only once its caller re-sends it (no
// one holds it meanwhile; review50), any other when its holder
// re-checks it against the policy in force and its approval quorum.
func runsWhen(mode string) string {
	if mode == "retry" {
		return "runs when its caller re-sends it, if the re-check against the policy in force admits it"
	}
	return "runs when its holder " + approval.RecheckWords
}

// outcome says what became of a decided request.
func outcome(a api.Approval) string {
	switch a.State {
	case "pending":
		return ""
	case "approved":
		if a.Kind != approval.KindSessionPolicy && a.Kind != approval.KindPolicyChange {
			return "approved by " + visible(a.DecidedBy) + ", not yet run: the call " + runsWhen(a.Mode)
		}
		return "approved by " + visible(a.DecidedBy) + ", not yet dispatched"
	case "consumed":
		o := a.DispatchOutcome
		if o == "" {
			o = "dispatching"
		}
		return "approved by " + visible(a.DecidedBy) + ", dispatched: " + visible(o)
	case "denied":
		return "denied by " + visible(a.DecidedBy) + ": " + visible(a.Reason)
	case "expired":
		if a.Reason != "" && a.Reason != "timed out" {
			return "expired: " + visible(a.Reason)
		}
		return "expired: no decision in time"
	case "cancelled":
		return "cancelled: " + visible(orDash(a.Reason))
	case "invalidated":
		return "invalidated: " + visible(orDash(a.Reason))
	}
	return visible(a.State)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// approvals counts the distinct approvers of a so far.
func approvals(a api.Approval) int {
	seen := map[string]bool{}
	for _, rv := range a.Reviews {
		if rv.Verdict == "approve" {
			seen[rv.By] = true
		}
	}
	return len(seen)
}

// shortID is the part of an id people compare: its last 8 characters (the
// random end of a UUIDv7; the start is a timestamp shared by ids made close
// together). Any unique suffix of 6 or more characters finds the approval.
func shortID(id string) string {
	if len(id) <= 8 {
		return id
	}
	return id[len(id)-8:]
}

// stamp formats t as RFC 3339 in UTC with milliseconds, or "".
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// human formats t for people, in UTC, or "-".
func human(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// timeLeft is the first text of a countdown (app.js keeps it current).
func timeLeft(d time.Duration) string {
	if d <= 0 {
		return "expired"
	}
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh %02dm left", h, m)
	case m > 0:
		return fmt.Sprintf("%dm %02ds left", m, s)
	}
	return fmt.Sprintf("%ds left", s)
}

// age is how long ago something happened, for people.
func age(d time.Duration) string {
	switch {
	case d < 5*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// visible returns s with every character that could hide or reorder text
// or pass for another (shownEscaped: controls including newlines, bidi and
// zero-width characters, spaces other than U+0020) written as a visible
// \uXXXX escape (case C15). The template then escapes it for HTML.
func visible(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if api.IsShownEscaped(r) || (r == utf8.RuneError && w == 1) {
			b.WriteString(escapeRune(r, s[i]))
		} else {
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}

// summaryLen is the most characters of a one-line argument summary, and
// valueLen of one string value in it.
const (
	summaryLen = 160
	valueLen   = 56
)

// plural returns one or many after n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// cutValue cuts s after about n characters with "…", so that the other
// members of a summary still fit; a redaction marker is never cut in two
// (the reader must see that something was hidden).
func cutValue(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut := 0
	for range n - 1 {
		_, w := utf8.DecodeRuneInString(s[cut:])
		cut += w
	}
	for _, m := range markerRE.FindAllStringIndex(s, -1) {
		if m[0] < cut && cut < m[1] {
			cut = m[1]
		}
	}
	if cut >= len(s) {
		return s
	}
	return s[:cut] + "…"
}

// A node is one value of a display copy, keeping member order and number
// literals as the copy has them.
type node struct {
	Kind    string // object, array, string, literal (number, true, false, null)
	Key     string // the member's key, when in an object
	Items   []node
	Str     string // decoded string
	Literal string
}

// maxDepth bounds the nesting the page renders: the display copy comes from
// agents, and approval.Display refuses deeper arguments anyway.
const maxDepth = approval.MaxDepth

// parseValue decodes a JSON text into a node tree.
func parseValue(data []byte) (node, error) {
	return parseTree(data, 0)
}

// maxTreeNodes is the most values (members, items, scalars) the detail
// page shows as a tree. The tree costs ≈ 120 bytes of HTML, ≈ 2.9 KB
// allocated and ≈ 72 allocations per value: 1 MB of small records was a
// 13 MB page and ≈ 330 MB allocated per view (fixes31). Larger arguments are shown as their
// display copy's text, whole (detailData).
const maxTreeNodes = 5000

// errTreeTooLarge is parseTree's answer past its limit of values.
var errTreeTooLarge = errors.New("more values than the page shows as a tree")

// parseTree is parseValue, failing with errTreeTooLarge once the text has
// more than limit values (none when limit is 0), after decoding at most
// that many.
func parseTree(data []byte, limit int) (node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	left := limit
	if limit <= 0 {
		left = -1
	}
	n, err := decodeNode(dec, data, 0, &left)
	if err != nil {
		return node{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return node{}, errors.New("data after the value")
	}
	return n, nil
}

// decodeNode decodes the next value of dec at depth; left counts down the
// values the tree may still take (negative: no limit).
func decodeNode(dec *json.Decoder, data []byte, depth int, left *int) (node, error) {
	if depth > maxDepth {
		return node{}, errors.New("nested too deeply")
	}
	if *left == 0 {
		return node{}, errTreeTooLarge
	}
	*left--
	from := dec.InputOffset()
	tok, err := dec.Token()
	if err != nil {
		return node{}, err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := node{Kind: "object"}
			for dec.More() {
				from := dec.InputOffset()
				kt, err := dec.Token()
				if err != nil {
					return node{}, err
				}
				key, _ := kt.(string)
				key = markLookAlikes(data[from:dec.InputOffset()], key)
				child, err := decodeNode(dec, data, depth+1, left)
				if err != nil {
					return node{}, err
				}
				child.Key = key
				n.Items = append(n.Items, child)
			}
			_, err := dec.Token() // '}'
			return n, err
		case '[':
			n := node{Kind: "array"}
			for dec.More() {
				child, err := decodeNode(dec, data, depth+1, left)
				if err != nil {
					return node{}, err
				}
				n.Items = append(n.Items, child)
			}
			_, err := dec.Token() // ']'
			return n, err
		}
		return node{}, fmt.Errorf("unexpected %v", v)
	case string:
		return node{Kind: "string", Str: markLookAlikes(data[from:dec.InputOffset()], v)}, nil
	case json.Number:
		return node{Kind: "literal", Literal: v.String()}, nil
	case bool:
		return node{Kind: "literal", Literal: fmt.Sprint(v)}, nil
	case nil:
		return node{Kind: "literal", Literal: "null"}, nil
	}
	return node{}, fmt.Errorf("unexpected token %v", tok)
}

// lookAlikeMark stands, in a string of the tree, for the "[" of the
// agent's text written like a marker, which the display copy writes
// \u005B (approval.Display): a byte that no decoded string holds (the
// decoder makes invalid UTF-8 U+FFFD). segments shows it as that escape.
const lookAlikeMark = "\xff"

// lookAlikeTitle is the tooltip of such a "[".
const lookAlikeTitle = "the agent's own text, written like a redaction marker: toolgate hid nothing here"

// markLookAlikes returns v, the decoded JSON string whose text as written
// (with what comes before it in the value: a comma, a colon, spaces) is
// raw, with each "[" that raw writes \u005B replaced by lookAlikeMark
// (markRowLookAlikes, which the inbox row uses on a prefix). Only strings
// that hold marker-like text are looked at.
func markLookAlikes(raw []byte, v string) string {
	if !strings.Contains(v, "[redacted") && !strings.Contains(v, "[truncated for display") {
		return v
	}
	return markRowLookAlikes(raw, v)
}

// A segment is a piece of a string as the page shows it: plain text, a
// visible escape of a hidden character, a redaction marker or a
// truncation marker.
type segment struct {
	Text  string
	Class string // "", "hidden", "redacted", "cut"
	Title string // for hidden characters: what it is
}

// markerRE finds the markers the display copy writes (approval.Display):
// redactions (in a value, or the part of a key it hides) and the
// truncation note.
var markerRE = regexp.MustCompile(`\[redacted: [^\]\n]{1,200}\]|\[redacted key \d{1,9}\]|…\[truncated for display: \d+ of \d+ characters shown\]`)

// segments splits s into the segments to show. With block set, line feeds
// and tabs stay as they are (a text block shows them); otherwise they are
// escaped too.
func segments(s string, block bool) []segment {
	var out []segment
	plain := func(t string) {
		if t == "" {
			return
		}
		if n := len(out); n > 0 && out[n-1].Class == "" {
			out[n-1].Text += t
			return
		}
		out = append(out, segment{Text: t})
	}
	text := func(t string) {
		start := 0
		for i := 0; i < len(t); {
			if t[i] == lookAlikeMark[0] {
				plain(t[start:i])
				out = append(out, segment{Text: `\u005B`, Class: "hidden", Title: lookAlikeTitle})
				i++
				start = i
				continue
			}
			r, w := utf8.DecodeRuneInString(t[i:])
			kept := block && (r == '\n' || r == '\t') // a text block shows these as they are
			hidden := api.IsShownEscaped(r) && !kept
			if r == utf8.RuneError && w == 1 {
				hidden = true
			}
			if hidden {
				plain(t[start:i])
				out = append(out, segment{Text: escapeRune(r, t[i]), Class: "hidden", Title: runeTitle(r)})
				start = i + w
			}
			i += w
		}
		plain(t[start:])
	}
	last := 0
	for _, m := range markerRE.FindAllStringIndex(s, -1) {
		text(s[last:m[0]])
		class := "redacted"
		if strings.HasPrefix(s[m[0]:], "…[truncated") {
			class = "cut"
		}
		out = append(out, segment{Text: visible(s[m[0]:m[1]]), Class: class})
		last = m[1]
	}
	text(s[last:])
	return out
}

// escapeRune writes r as a visible escape: \n and \t short, others \uXXXX
// (\UXXXXXXXX above U+FFFF), an invalid byte \xFF.
func escapeRune(r rune, b byte) string {
	switch {
	case r == utf8.RuneError:
		return fmt.Sprintf(`\x%02X`, b)
	case r == '\n':
		return `\n`
	case r == '\t':
		return `\t`
	case r == '\r':
		return `\r`
	case r > 0xFFFF:
		return fmt.Sprintf(`\U%08X`, r)
	}
	return fmt.Sprintf(`\u%04X`, r)
}

// runeTitle names a hidden character for a tooltip.
func runeTitle(r rune) string {
	if api.IsLookAlikeSpace(r) {
		return fmt.Sprintf("look-alike space U+%04X: it was escaped so it cannot pass for a plain space", r)
	}
	return fmt.Sprintf("hidden character U+%04X: it was escaped so it cannot hide or reorder text", r)
}
