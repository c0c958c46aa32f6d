// Package policy decides what happens to one tool call: allow, deny or
// approve (hold it for a human). It is pure: no I/O, no clock, no state
// beyond the Policy value, so a Policy is safe for concurrent use as long as
// nobody mutates it.
//
// Rules match the real (server, tool) pair of a call, never the exposed
// "<server>__<tool>" alias, so a rule written for one server cannot leak to
// another whose name differs only by punctuation (case C06).
//
// [Revision] identifies a policy's content, [Diff] summarises a change and
// [Narrows] decides whether a change can only make decisions stricter (the
// rules are in docs/policy.md). A [Holder] holds the policy in force so it
// can be swapped at run time.
//
// Globs (see [Match]) are path.Match patterns in which '/' is an ordinary
// character. Typical use:
//
//	if errs := p.Validate(); errs != nil { ... }   // at load time
//	d, err := p.Evaluate(policy.Call{Server: "fs", Tool: "write_file", Principal: id})
//	if err != nil { deny }                         // fail closed
package policy
