package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// refSeparator joins a server name and a tool name in a ref, as in exposed
// tool names.
const refSeparator = "__"

// ValidServerName reports whether s is a server name as config allows it:
// [a-z0-9][a-z0-9-]* (so it never contains "__").
func ValidServerName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case r == '-' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ParseRef splits a tool ref into its server and tool: "<server>" gives
// tool "" (the whole server), "<server>__<tool>" splits at the first "__"
// (server names never contain it). It returns an error wrapping ErrBadRef
// for anything else.
func ParseRef(ref string) (server, tool string, err error) {
	server, tool, found := strings.Cut(ref, refSeparator)
	if !ValidServerName(server) || (found && tool == "") {
		return "", "", fmt.Errorf("%w: %q: want <server> or <server>__<tool> with server [a-z0-9][a-z0-9-]*", ErrBadRef, ref)
	}
	return server, tool, nil
}

// NormalizeRefs parses refs (see Item) and returns them sorted and
// deduplicated, with refs dropped when the same list has a ref covering
// them (their whole server, or their kind's group ref). nil stays nil (no
// tools given); an empty list stays empty (nothing). Errors wrap
// ErrBadRef, or ErrUnknownServer when serverExists (if not nil) says no.
func NormalizeRefs(refs []string, serverExists func(string) bool) ([]string, error) {
	if refs == nil {
		return nil, nil
	}
	items := make([]Item, 0, len(refs))
	for _, r := range refs {
		it, err := ParseItemRef(r)
		if err != nil {
			return nil, err
		}
		if serverExists != nil && !serverExists(it.Server) {
			return nil, fmt.Errorf("%w: %q in ref %q", ErrUnknownServer, it.Server, r)
		}
		items = append(items, it)
	}
	out := make([]string, 0, len(refs))
	for i, it := range items {
		covered := slices.ContainsFunc(refs, func(o string) bool {
			return o != refs[i] && (o == it.Server || (it.Name != "" && o == it.group()))
		})
		if !covered {
			out = append(out, refs[i])
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// NormalizeRequirement returns r with its tool list sorted and
// deduplicated; an empty list means false (the zero Requirement), and All
// drops the list.
func NormalizeRequirement(r Requirement) Requirement {
	if r.All {
		return Requirement{All: true}
	}
	if len(r.Tools) == 0 {
		return Requirement{}
	}
	ts := slices.Clone(r.Tools)
	slices.Sort(ts)
	return Requirement{Tools: slices.Compact(ts)}
}

// IsZero reports whether r requires nothing.
func (r Requirement) IsZero() bool { return !r.All && len(r.Tools) == 0 }

// Covers reports whether r requires approval for tool.
func (r Requirement) Covers(tool string) bool {
	return r.All || slices.Contains(r.Tools, tool)
}

// Equal reports whether r and o require the same, once normalized.
func (r Requirement) Equal(o Requirement) bool {
	r, o = NormalizeRequirement(r), NormalizeRequirement(o)
	return r.All == o.All && slices.Equal(r.Tools, o.Tools)
}

// Union returns what r or o requires, normalized.
func (r Requirement) Union(o Requirement) Requirement {
	if r.All || o.All {
		return Requirement{All: true}
	}
	return NormalizeRequirement(Requirement{Tools: append(slices.Clone(r.Tools), o.Tools...)})
}

// MarshalJSON writes true, false, or the sorted tool list.
func (r Requirement) MarshalJSON() ([]byte, error) {
	r = NormalizeRequirement(r)
	switch {
	case r.All:
		return []byte("true"), nil
	case r.IsZero():
		return []byte("false"), nil
	}
	return json.Marshal(r.Tools)
}

// UnmarshalJSON reads true, false, or a list of tool names (non-empty
// strings), and normalizes it: ["b","a","a"] becomes ["a","b"] and []
// becomes false.
func (r *Requirement) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return errors.New("require_approval: want true, false or a list of tool names, not null")
	}
	var v bool
	if err := json.Unmarshal(b, &v); err == nil {
		*r = Requirement{All: v}
		return nil
	}
	var ts []string
	if err := json.Unmarshal(b, &ts); err != nil || ts == nil {
		return errors.New("require_approval: want true, false or a list of tool names")
	}
	for _, t := range ts {
		if t == "" {
			return errors.New("require_approval: empty tool name")
		}
	}
	*r = NormalizeRequirement(Requirement{Tools: ts})
	return nil
}

// NormalizeRequirements normalizes every entry of m and drops those that
// require nothing; an empty result is nil. Errors wrap ErrBadRef for a key
// that is not a server name, or ErrUnknownServer when serverExists (if not
// nil) says no.
func NormalizeRequirements(m map[string]Requirement, serverExists func(string) bool) (map[string]Requirement, error) {
	var out map[string]Requirement
	for s, r := range m {
		if !ValidServerName(s) {
			return nil, fmt.Errorf("%w: require_approval key %q: want a server name", ErrBadRef, s)
		}
		if serverExists != nil && !serverExists(s) {
			return nil, fmt.Errorf("%w: %q in require_approval", ErrUnknownServer, s)
		}
		r = NormalizeRequirement(r)
		if r.IsZero() {
			continue
		}
		if out == nil {
			out = map[string]Requirement{}
		}
		out[s] = r
	}
	return out, nil
}

// Revoked reports whether s was revoked.
func (s Session) Revoked() bool { return !s.RevokedAt.IsZero() }

// A Chain is a session followed by its ancestors: the session first, the
// root last. Its methods give the session's effective policy.
type Chain []Session

// Revoked reports whether any level of c was revoked (revoking a session
// revokes its descendants). An empty chain counts as revoked.
func (c Chain) Revoked() bool {
	return len(c) == 0 || slices.ContainsFunc(c, Session.Revoked)
}

// RevokedAt returns when the first revoked level of c was revoked, or the
// zero time when none was.
func (c Chain) RevokedAt() time.Time {
	for _, s := range c {
		if s.Revoked() {
			return s.RevokedAt
		}
	}
	return time.Time{}
}

// Allows reports whether the session may call tool of server: every
// explicit level must have a ref covering it. Default and inherited levels
// add no limit beyond the deployment's exposed tools. tool "" asks for the
// whole server, which only "<server>" refs cover. An empty chain allows
// nothing. See AllowsItem for prompts and resources.
func (c Chain) Allows(server, tool string) bool {
	return c.AllowsItem(ToolItem(server, tool))
}

// RequiresApproval reports whether any level of c requires approval for
// tool of server: a child's requirement is the union of its own and its
// ancestors'.
func (c Chain) RequiresApproval(server, tool string) bool {
	for _, s := range c {
		if s.RequireApproval[server].Covers(tool) {
			return true
		}
	}
	return false
}

// Requirements returns the effective requirement per server: the union of
// every level's. nil when nothing is required.
func (c Chain) Requirements() map[string]Requirement {
	var out map[string]Requirement
	for _, s := range c {
		for srv, r := range s.RequireApproval {
			if out == nil {
				out = map[string]Requirement{}
			}
			out[srv] = out[srv].Union(r)
		}
	}
	return out
}

// Tracking reports whether the session's tool set tracks the deployment's
// exposed tools: no level is explicit.
func (c Chain) Tracking() bool {
	return !slices.ContainsFunc(c, func(s Session) bool { return s.Mode == ModeExplicit })
}

// EffectiveTools returns the refs of the nearest explicit level that the
// whole chain allows, sorted, and the id of the session they come from. ok
// is false when the chain tracks the deployment (no explicit level).
func (c Chain) EffectiveTools() (refs []string, from ID, ok bool) {
	for _, s := range c {
		if s.Mode != ModeExplicit {
			continue
		}
		refs = []string{}
		for _, r := range s.Tools {
			it, err := ParseItemRef(r)
			if err == nil && c.AllowsItem(it) {
				refs = append(refs, r)
			}
		}
		return refs, s.ID, true
	}
	return nil, "", false
}

// CheckNarrow checks the explicit refs a child of c asks for and returns
// them normalized (see NormalizeRefs). A "<server>" ref needs every
// explicit level of c to allow the whole server; a "<server>__<tool>" ref
// needs each to cover that tool, and likewise for prompt and resource refs
// (a group ref needs the group or the whole server). The first ref that would widen gives a
// *WidenError (wrapping ErrWiden) naming it; a bad ref wraps ErrBadRef and
// an unknown server ErrUnknownServer. nil refs (no tools given) pass.
func (c Chain) CheckNarrow(refs []string, serverExists func(string) bool) ([]string, error) {
	norm, err := NormalizeRefs(refs, serverExists)
	if err != nil {
		return nil, err
	}
	for _, r := range norm {
		it, _ := ParseItemRef(r)
		if !c.AllowsItem(it) {
			return nil, &WidenError{Ref: r}
		}
	}
	return norm, nil
}

// A WidenError names the first ref of a child that its parent does not
// allow. It wraps ErrWiden; its text is the API's 403 message.
type WidenError struct{ Ref string }

func (e *WidenError) Error() string {
	return "child tools may only narrow the parent session tool policy: " + e.Ref
}

func (e *WidenError) Unwrap() error { return ErrWiden }

// ChildMode is the mode of a child of c created with refs: explicit when
// refs is not nil; else default when c tracks the deployment (so the child
// keeps tracking it), and inherited otherwise.
func (c Chain) ChildMode(refs []string) Mode {
	switch {
	case refs != nil:
		return ModeExplicit
	case c.Tracking():
		return ModeDefault
	default:
		return ModeInherited
	}
}

// PrincipalID is the principal id of session id, recorded as requested_by
// on its approvals: "session:<id>".
func PrincipalID(id ID) string { return "session:" + string(id) }
