package session

import (
	"errors"
	"slices"
	"strings"
)

// ErrCeiling means a session asked for more than its ceiling allows: its
// parent's effective policy, or the deployment's exposed servers and
// tools. No approval can grant it.
var ErrCeiling = errors.New("session: the change exceeds the session's ceiling")

// A CeilingError names the first part of a change past the ceiling. It
// wraps ErrCeiling; its text is the API's 403 message.
type CeilingError struct{ What string }

func (e *CeilingError) Error() string {
	return "the change exceeds the session's ceiling (its parent's effective policy or the deployment's exposed tools), so nothing was applied and no approval can allow it: " + e.What
}

func (e *CeilingError) Unwrap() error { return ErrCeiling }

// ErrEmptyChange means a Change names nothing to change.
var ErrEmptyChange = errors.New("session: the change names nothing to change (give tools and/or require_approval)")

// A Change is what a session asks to change of its own policy (issue 6,
// "Session policy requests"). Its JSON form is the body of POST
// /v1/sessions/{id}/policy-requests and the display copy of the approval:
//
//	{"tools": ["<server>", "<server>__<tool>", …], "require_approval": {"<server>": true|false|["tool", …]}}
//
// Tools absent (nil) leaves the tool set as it is; a list (even empty)
// makes the session explicit with exactly those refs. RequireApproval sets
// the session's own requirement of each listed server (false removes it);
// servers not listed keep theirs.
type Change struct {
	Tools           *[]string              `json:"tools,omitempty"`
	RequireApproval map[string]Requirement `json:"require_approval,omitempty"`
}

// IsZero reports whether ch changes nothing by its shape: no tools and no
// requirement given.
func (ch Change) IsZero() bool { return ch.Tools == nil && len(ch.RequireApproval) == 0 }

// Classify checks ch against the session's chain c (c[0] is the session)
// and returns it normalized (refs sorted and deduplicated, requirements
// normalized) together with the parts that widen the session's current
// policy, as short descriptions ("tool github__merge", "require_approval
// of github"). No widening parts means the change only narrows (or changes
// nothing) and may apply at once.
//
// The rules: a tool ref widens when the current chain does not allow it
// (Chain.Allows); a server's requirement widens when the new one does not
// cover every tool the session's own current one covers. A ref is past the
// ceiling (a *CeilingError) when its server is not configured
// (serverExists), the parent chain c[1:] does not allow it, or it widens
// and names a tool the deployment does not expose (toolExists, when not
// nil; prompt and resource refs are not checked against the catalog); a requirement is past the ceiling when its server is not
// configured, or when it drops a tool the parent chain c[1:] requires
// approval for (the union with the parent's would keep it). Errors: ErrEmptyChange, ErrBadRef, ErrCeiling. A nil
// serverExists accepts every valid server name.
func (c Chain) Classify(ch Change, serverExists func(string) bool, toolExists func(server, tool string) bool) (Change, []string, error) {
	if len(c) == 0 {
		return Change{}, nil, errors.New("session: empty chain")
	}
	if ch.IsZero() {
		return Change{}, nil, ErrEmptyChange
	}
	if serverExists == nil {
		serverExists = func(string) bool { return true }
	}
	var out Change
	var widens []string
	if ch.Tools != nil {
		refs, err := NormalizeRefs(*ch.Tools, nil)
		if err != nil {
			return Change{}, nil, err
		}
		if refs == nil {
			refs = []string{}
		}
		parent := c[1:]
		for _, r := range refs {
			it, _ := ParseItemRef(r)
			switch {
			case !serverExists(it.Server):
				return Change{}, nil, &CeilingError{What: "unknown server " + it.Server + " in " + r}
			case len(parent) > 0 && !parent.AllowsItem(it):
				return Change{}, nil, &CeilingError{What: "the parent session does not allow " + r}
			case c.AllowsItem(it):
				continue
			case it.Kind == KindTool && toolExists != nil && !toolExists(it.Server, it.Name):
				return Change{}, nil, &CeilingError{What: "the deployment exposes no tool " + r}
			}
			widens = append(widens, it.describe())
		}
		out.Tools = &refs
	}
	for _, srv := range sortedKeys(ch.RequireApproval) {
		if !ValidServerName(srv) {
			return Change{}, nil, &CeilingError{What: "require_approval key " + srv + " is not a server name"}
		}
		if !serverExists(srv) {
			return Change{}, nil, &CeilingError{What: "unknown server " + srv + " in require_approval"}
		}
		r := NormalizeRequirement(ch.RequireApproval[srv])
		if len(c) > 1 {
			// The session's requirement is the union with its ancestors':
			// dropping what they require would change nothing, so it is
			// past the ceiling rather than an approval that does nothing.
			if p := NormalizeRequirement(c[1:].Requirements()[srv]); weakens(p, r) {
				return Change{}, nil, &CeilingError{What: "the parent session requires approval for " + srv + " (its effective require_approval." + srv + " is " + requirementText(p) + "), so require_approval." + srv + " = " + requirementText(r) + " would change nothing"}
			}
		}
		if out.RequireApproval == nil {
			out.RequireApproval = map[string]Requirement{}
		}
		out.RequireApproval[srv] = r
		if weakens(c[0].RequireApproval[srv], r) {
			widens = append(widens, "require_approval of "+srv)
		}
	}
	return out, widens, nil
}

// weakens reports whether requirement to drops a tool that from covers.
func weakens(from, to Requirement) bool {
	from, to = NormalizeRequirement(from), NormalizeRequirement(to)
	switch {
	case to.All:
		return false
	case from.All:
		return true
	}
	return slices.ContainsFunc(from.Tools, func(t string) bool { return !slices.Contains(to.Tools, t) })
}

// Apply writes ch into s's own policy: Tools (explicit mode) when given,
// and each listed server's requirement (false removes it).
func (ch Change) Apply(s *Session) {
	if ch.Tools != nil {
		s.Mode = ModeExplicit
		s.Tools = slices.Clone(*ch.Tools)
		if s.Tools == nil {
			s.Tools = []string{}
		}
	}
	for srv, r := range ch.RequireApproval {
		r = NormalizeRequirement(r)
		if r.IsZero() {
			delete(s.RequireApproval, srv)
			continue
		}
		if s.RequireApproval == nil {
			s.RequireApproval = map[string]Requirement{}
		}
		s.RequireApproval[srv] = r
	}
}

// Describe returns widening parts as one phrase for messages.
func Describe(widens []string) string { return strings.Join(widens, ", ") }

func sortedKeys(m map[string]Requirement) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
