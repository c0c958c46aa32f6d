package session

import (
	"encoding/json"
	"fmt"
)

// CheckRequirements checks the require_approval a child of c states and
// returns it normalized (NormalizeRequirements). A child's requirement is
// the union of its own and its ancestors', so a stated requirement that
// drops something the parent chain c requires of that server (false, or
// a list missing a tool, under the parent's true or list) would be
// overridden without a word and the child would believe it got what it
// asked for: the first such server (in name order) gives a
// *RequirementWidenError (wrapping ErrWiden) naming it and the parent's
// effective value. A child may restate the parent's requirement or add to
// it. Key errors wrap ErrBadRef or ErrUnknownServer, as in
// NormalizeRequirements.
func (c Chain) CheckRequirements(m map[string]Requirement, serverExists func(string) bool) (map[string]Requirement, error) {
	out, err := NormalizeRequirements(m, serverExists)
	if err != nil {
		return nil, err
	}
	parent := c.Requirements()
	for _, srv := range sortedKeys(m) {
		if asked := NormalizeRequirement(m[srv]); weakens(parent[srv], asked) {
			return nil, &RequirementWidenError{Server: srv, Asked: asked, Parent: NormalizeRequirement(parent[srv])}
		}
	}
	return out, nil
}

// A RequirementWidenError names the first server whose require_approval a
// child states weaker than its parent session's effective requirement. It
// wraps ErrWiden; its text is the API's 403 message.
type RequirementWidenError struct {
	Server string
	Asked  Requirement
	Parent Requirement
	// Set is true when the value was set on an existing child (the admin
	// PUT …/require-approval), where there is nothing to leave out: false
	// is the value asked.
	Set bool
}

func (e *RequirementWidenError) Error() string {
	instead := "true"
	if !e.Parent.All {
		instead = "true, or a list that includes " + requirementText(e.Parent)
	}
	tail := fmt.Sprintf("; state %s, or leave %s out to inherit it", instead, e.Server)
	if e.Set {
		tail = fmt.Sprintf("; set %s (the child inherits its parent's requirement whatever it states)", instead)
	}
	return fmt.Sprintf("a child session may only narrow its parent's policy, and require_approval.%s = %s would drop approvals the parent session requires (its effective require_approval.%s is %s)%s",
		e.Server, requirementText(e.Asked), e.Server, requirementText(e.Parent), tail)
}

// CheckRequirement checks r, the requirement of server being set on a
// child of c (c is the child's parent chain), as CheckRequirements does
// for a new child: a value weaker than c's effective requirement of
// server is a *RequirementWidenError (Set true). r must be normalized.
func (c Chain) CheckRequirement(server string, r Requirement) error {
	if parent := c.Requirements()[server]; weakens(parent, r) {
		return &RequirementWidenError{Server: server, Asked: r, Parent: NormalizeRequirement(parent), Set: true}
	}
	return nil
}

func (e *RequirementWidenError) Unwrap() error { return ErrWiden }

// requirementText is r as JSON: true, false or the tool list.
func requirementText(r Requirement) string {
	b, err := json.Marshal(r)
	if err != nil {
		return "?"
	}
	return string(b)
}
