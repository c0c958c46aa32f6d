// Package api is the approver side of toolgate: the admin HTTP API that
// lists approval requests and records reviews, plus /healthz, /readyz and
// /metrics. It never imports the agent side (internal/gateway); both meet in
// the gate, which implements [Approvals].
//
// # Routes
//
//	GET  /healthz                       no auth; always 200 {"status":"ok"}
//	GET  /readyz                        no auth; 200 [ReadyReport] {"status":"ok","upstreams":{…}},
//	                                    or 503 with "status":"unavailable" and the error
//	                                    envelope: the store (Options.Ready) or a required
//	                                    upstream (Options.Upstreams) is down
//	GET  /metrics                       no auth; Options.Metrics, when set
//	GET  /v1/approvals                  viewer, approver, admin → [List]
//	GET  /v1/approvals/{id}             viewer, approver, admin → [Approval]
//	POST /v1/approvals/{id}/approve     approver, admin; body [ApproveBody] → [Approval]
//	POST /v1/approvals/{id}/deny        approver, admin; body [DenyBody] → [Approval]
//	POST /v1/sessions                   host, admin; body [CreateSessionBody] → 201 [CreatedSession]
//	GET  /v1/sessions/{id}              host, admin, viewer, approver → [Session] (ETag: revision)
//	PUT  /v1/sessions/{id}/servers/{server}/require-approval
//	                                    host, admin; If-Match: revision; body true|false|[tools]
//	                                    → [RequirementChange]
//	DELETE /v1/sessions/{id}            host, admin → [Revoked]
//	POST /v1/policy/proposals           admin; body [ProposeBody] → 201 [ProposeResult] (applied)
//	                                    or 202 [ProposeResult] (a policy_change approval)
//	POST /v1/policy/proposals/{id}/apply
//	                                    admin → store.PolicyRevision (applies an approved proposal)
//	GET  /v1/policy?revision=N          viewer, approver, admin → store.PolicyRevision
//	GET  /v1/policy/diff?from=A&to=B    viewer, approver, admin → [PolicyDiff]
//	POST /v1/policy/explain             viewer, approver, admin; body [ExplainBody]
//	                                    → policy.Explanation (how the policy in force decides it)
//	GET  /v1/events?since=CURSOR&limit=N viewer, approver, admin → [EventPage]
//	GET  /v1/events/stream              viewer, approver, admin → text/event-stream of [Event]
//	GET  /v1/grants?state=active|all    viewer, approver, admin → [GrantList]
//	     (also limit, cursor, id_prefix, id_suffix, as for approvals: the
//	     order the store created the grants in, oldest first; a grant id
//	     cursor of earlier versions is still accepted)
//	GET  /v1/grants/{id}                viewer, approver, admin → [Grant] with recent uses
//	POST /v1/grants/{id}/revoke         approver, admin; body [RevokeBody] → [Grant]
//
// The session routes exist when Options.Sessions is set, the policy routes
// (policy.source: store; docs/policy.md) when Options.Policies is set,
// POST /v1/policy/explain when Options.Explain is set, and the grant routes
// when Options.Grants is set. An approve body may carry a "grant" object
// ([GrantBody]): the approval is then also remembered as a grant for the
// requesting principal, server and tool (docs/policy.md "Remembered
// grants"); the answer carries the grant once it is made. A grant longer
// than grants.max_ttl, a bad predicate or a grant on a policy approval is
// 422; terms fewer approvers than the quorum attached are 409
// grant_not_endorsed; terms on a call for which grants are turned off
// (approval.grants: false, grants.enabled: false) are 409 grants_forbidden.
// Approving a policy_change approval applies it in the same request (see
// [Policies]); the answer shows it consumed, or invalidated when the
// policy moved past its base revision. [AgentSessions] serves
// POST /v1/sessions on the agent listener for session tokens (child sessions).
//
// /metrics needs no token: the admin listener is loopback or a Unix socket by
// default, and metrics carry no arguments, ids or reasons. Put it behind a
// proxy if the listener is exposed.
//
// The list takes the query parameters state (a state name, or "all"; absent
// means all states), limit (1–1000; absent means the store's default of 100),
// cursor (the next_cursor of the previous page: opaque, a store.ListPosition;
// an approval id, the cursor of earlier versions, is still accepted),
// order (oldest, the default, or newest: the order in which the store
// created the approvals, see store.Filter), id_prefix and id_suffix
// (lower-case hex and dashes, at most 36 characters; toolgate's extension
// for short ids, which may be a unique start or end of an id). A bad value
// is 422. A page may hold fewer than limit approvals and still have a
// next_cursor (on Postgres, cut where its cursor would carry too many
// running transactions); only a next_cursor of "" ends the list.
//
// # Events
//
// The event routes (when Options.Events is set; 404 otherwise) read the
// store's change feed (store.Store.Feed), filtered to what the caller may
// see: an approval's events when it may see the approval (its tenant), a
// session's when it may see the session, a grant's when it may see the
// grant (its tenant; none to a caller with a tenant when Options.Grants is
// not set), the deployment policy's always.
// Positions are feed cursors, "<tx>.<seq>" (store.Cursor): each [Event]
// carries its own. The feed's order is final, so a reader resuming at a
// cursor never skips an event that committed late (on Postgres an event
// with a lower seq can commit after one with a higher seq). since= is a
// cursor, or "0" (and "") for the start of the log; a plain sequence
// number above 0 is 422, since "after seq N" is no position in the feed.
// Both routes also refuse (422) a since= (or the stream's Last-Event-ID) that is no
// position in this store's feed: past its end, naming no event of it, or
// of the other store kind (a cursor from another store; see
// Server.resumeCursor).
// GET /v1/events answers one page after since, limit 1–1000 (default
// 100); next is the cursor of the last event read (visible or not) and
// more says the log may go on. GET /v1/events/stream sends server-sent
// events: "id:" the event's cursor, "event:" the type, "data:" the [Event]
// JSON on one line; it starts after Last-Event-ID, else after ?since=, else
// at the end of the feed (new events only), says where in a first comment
// line (": stream after <cursor>"), moves the client's last id past events
// it may not see with id-only messages, sends ": hb" every
// Options.Heartbeat, and reads the feed on every Options.EventsChanged
// wake-up and every Options.EventPoll. Streams end when the client goes or
// [Server.EndStreams] is called.
//
// # Authentication and roles
//
// Every /v1 route needs "Authorization: Bearer <token>"; a missing or unknown
// token is 401 with "WWW-Authenticate: Bearer". The roles come from the
// [Authenticator] (DESIGN "Roles"): viewer reads, approver reads and reviews,
// admin does everything; host manages sessions only (403 on approvals). Whether an
// approver may review a particular request (the rule's approvers, self-review)
// is decided by [Approvals.Review]. A principal with a tenant sees only its
// tenant's requests; another tenant's request is 404, as if it did not exist.
//
// # Ids
//
// {id} must be a full UUID in canonical text form (upper case is accepted and
// lower-cased). Anything else is 404, the same as an unknown id: ids are not
// secrets, but one answer for "no such approval" keeps clients simple. Short
// ids are resolved by clients through id_prefix and id_suffix.
//
// # The web inbox
//
// internal/web serves the inbox on the same listener through the exported
// methods of [Server] ([Server.ListApprovals], [Server.GetApproval],
// [Server.Review], [Server.ServeEventStream]) for a [Caller] it
// authenticated by its session cookie: the same role, tenant and review
// rules as the routes, and the one review path.
//
// # Bodies
//
// Bodies are JSON objects, decoded strictly: an unknown field, a wrong type or
// trailing data is 422; more than 64 KiB is 413. An empty body is the same as
// {}. The deny reason is optional here (the CLI asks for one): it is what the
// agent reads, so a reason is recommended. A reason is at most 2000 bytes.
// arguments_hash, when given on approve, must be "sha256:" and 64 lower-case
// hex digits (422 otherwise); if it differs from the request's hash the
// answer is 409 hash_mismatch and nothing is recorded.
//
// # Errors
//
// Every error is {"error":{"code","message"}} with a status from one mapping
// ([ErrorBody]): 400 invalid_request (unreadable body); 401 unauthorized;
// 403 forbidden (role), self_review, not_eligible, widen (a child session
// asking for more than its parent; the message names the ref); 404 not_found
// (also unknown routes, unknown or revoked sessions); 405 method_not_allowed;
// 409 resolved, expired, conflict, hash_mismatch (the message names the
// current state, or the request's hash), grant_not_endorsed, grants_forbidden, stale_revision (If-Match),
// policy_moved (a proposal's base is no longer the current revision),
// not_approved (applying a proposal that is not approved);
// 413 too_large; 422 invalid_request (also unknown servers and bad refs);
// 428 precondition_required (If-Match missing); 503 unavailable (store
// unreachable, or /readyz failing); 500 internal. The message is safe to show; the underlying cause is only
// logged. Repeating one's own verdict is not an error: it answers 200 with the
// current request.
//
// # Output
//
// Responses are application/json. Characters that can hide or reorder text
// (controls, bidi, zero-width, see [IsHidden]) are written as \u escapes in
// every response, so a terminal or browser never renders them raw (case C15).
// Times are RFC 3339 in UTC. The Date header comes from Options.Now, so
// clients can compute "expires in" against the server's clock.
package api
