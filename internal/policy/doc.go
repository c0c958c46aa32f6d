// Package policy decides what happens to one agent request (a tools/call,
// a prompts/get, a resources/read): allow, deny or approve (hold it for a
// human). It is pure: no I/O, no clock, no state beyond the Policy value
// and its compiled form, so a Policy is safe for concurrent use as long as
// nobody mutates it.
//
// Rules match the real (server, tool) pair of a call (or the real prompt
// name or resource URI; see [Call.Kind]), never the exposed
// "<server>__<tool>" alias, so a rule written for one server cannot leak to
// another whose name differs only by punctuation (case C06). A rule may
// also select calls by a CEL condition over the arguments and the caller
// (Rule.When), the simple commands of a shell command argument
// ([CommandMatch]), the tool's annotation hints ([AnnotationSelector],
// honoured only when the caller passes trusted [Annotations]) and the
// caller ([Rule.Principals]). A selector that errs or cannot be known never
// allows. Rules (or the whole policy) in monitor mode only record what they
// would have done ([Monitor]). Remembered grants are data the caller passes
// in ([Call.Grants]): one that matches exactly turns an approve decision
// into an allow ([Evaluator.MatchGrant]), never anything else.
// docs/policy.md states every guarantee.
//
// [Compile] turns a Policy into an [Evaluator] once per revision (compiled
// globs, CEL programs and command patterns, and an index from (server,
// tool) to candidate rules); [Evaluator.Explain] traces a decision rule by
// rule and [Evaluator.DeniedRegardless] answers whether a tool can be
// hidden from a caller's lists. [Revision] identifies a policy's content,
// [Diff] summarises a change and [Narrows] decides whether a change can only
// make decisions stricter. A [Holder] holds the compiled policy in force so
// it can be swapped at run time.
//
// Globs (see [Match]) are path.Match patterns in which '/' is an ordinary
// character. Typical use:
//
//	if errs := p.Validate(); errs != nil { ... }   // at load time
//	h := policy.NewHolder(p)                       // compiles p
//	d, err := h.Evaluate(policy.Call{Server: "fs", Tool: "write_file", Principal: policy.Principal{ID: id}, Arguments: raw})
//	if err != nil { deny }                         // fail closed
package policy
