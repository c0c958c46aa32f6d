// Package approval is the domain of toolgate's approvals: the Request record
// and its state machine, the canonical JSON and hash that bind an approval
// to the exact tool arguments, and the redacted display copy shown to
// approvers.
//
// Everything here is pure: no I/O, no clock, no logging. Transitions such as
// [Request.Review], [Request.Expire] and [Request.Consume] take the current
// time as an argument and either change the request or return a sentinel
// error and leave it untouched, so a store can run them inside one
// read-modify-write transaction (see store.Store.UpdateRequest).
//
// The state machine (see DESIGN "Approval state machine"):
//
//	pending → approved (enough approvals) | denied (an eligible deny)
//	        | expired (deadline) | cancelled (notifications/cancelled)
//	approved → consumed (dispatch) | expired (unused past valid_for)
//	         | invalidated (revalidation at consume fails)
//
// [Hash] canonicalizes arguments as RFC 8785 does, except that numbers keep
// the literal the agent sent; [Display] builds the copy that is stored and
// shown, with secrets redacted and invisible characters escaped and flagged.
package approval
