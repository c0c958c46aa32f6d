// Package web is the approver inbox: server-rendered pages under /ui/ on
// the admin listener, with live updates over server-sent events. Its data
// and its decisions come from the admin API ([Backend], *api.Server):
// approving or denying from a page runs the same review code as
// POST /v1/approvals/{id}/approve and /deny, with the same role, tenant,
// eligibility and hash checks.
//
// # Pages
//
//	GET  /ui/                        pending approvals the approver may see, newest first
//	GET  /ui/approvals/{id}          one approval in full; a short id (a unique prefix or
//	                                 suffix of 6+ characters) redirects to it
//	POST /ui/approvals/{id}/approve  form: csrf, arguments_hash (the hash shown), reason?;
//	                                 with grant=1 also grant_duration, grant_max_uses?,
//	                                 grant_when? (approve and remember as a grant, issue 12)
//	POST /ui/approvals/{id}/deny     form: csrf, arguments_hash, reason (required)
//	POST /ui/approve                 bulk: csrf, approve="<id> <hash>" (repeated), reason?
//	GET  /ui/history                 decided approvals: state, server, tool, requester, from, to
//	GET  /ui/grants                  grants the approver may see, active first
//	POST /ui/grants/{id}/revoke      form: csrf, reason?
//	GET  /ui/events                  the admin API's event stream for the signed-in approver
//	GET  /ui/fragment/...            page parts the script re-renders on events
//	GET  /ui/signin, POST /ui/signin sign in by pasting a token once
//	POST /ui/signout                 end the session (on every instance)
//	GET  /ui/static/{file}           the embedded stylesheet, script and icon
//
// # Sessions and CSRF
//
// Signing in checks the token once ([Identify]) and stores a session
// ([Sessions]) named by the SHA-256 of a random cookie value; the cookie is
// HttpOnly, SameSite=Strict, Path=/ui/, Secure over TLS or when the public
// URL is https, and lives Options.SessionTTL. The store keeps the token's
// hash, not the token, so a token removed from the configuration ends its
// sessions; any instance sharing the store accepts the cookie. Every POST
// checks the Origin header (it must be the request's own origin or the
// public URL's; absent or "null" is refused, as is a cross-site
// Sec-Fetch-Site) and a CSRF token: for a session, a hash of its cookie
// value only the browser can compute; for the sign-in form, a double-submit
// cookie. A GET never changes state.
//
// # Headers and escaping
//
// Every answer carries a Content-Security-Policy without inline script or
// style ("default-src 'none'; script-src 'self'; ... frame-ancestors
// 'none'"), Referrer-Policy: no-referrer, Cache-Control: no-store,
// X-Content-Type-Options: nosniff and X-Frame-Options: DENY. Everything
// shown is escaped by html/template; characters that could hide or reorder
// text are shown as visible \uXXXX escapes, redaction and truncation
// markers are highlighted, and display warnings head the detail page.
// Argument values never become links or attributes other than text.
//
// # Test hooks
//
// The sign-in token field is name="token"; approval rows and the detail
// carry data-approval-id and data-state; buttons data-action="approve",
// "deny" (and "approve-grant", "revoke-grant", "bulk-approve", "signin",
// "signout"); the reason field is name="reason"; grant rows carry
// data-grant-id and data-state, their predicate data-predicate.
package web
