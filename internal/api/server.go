package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Approvals is what the API needs from the gate. Implementations must be
// safe for concurrent use.
type Approvals interface {
	// Get returns the request, or an error wrapping store.ErrNotFound.
	Get(ctx context.Context, id approval.ID) (approval.Request, error)
	// List returns one page of requests and the cursor of the next page
	// ("" at the end).
	List(ctx context.Context, f store.Filter) ([]approval.Request, string, error)
	// EachRequest is List that hands the page's requests to fn one at a
	// time, in order, as they are read (GET /v1/approvals streams its
	// page). An error of fn ends the page and is returned as is; next is
	// "" whenever err is not nil.
	EachRequest(ctx context.Context, f store.Filter, fn func(approval.Request) error) (next string, err error)
	// Review records verdict v by the authenticated reviewer and returns the
	// request after the change. Errors (errors.Is): store.ErrNotFound;
	// approval.ErrDuplicate when the reviewer repeats the same verdict, in
	// which case the returned request is the current one and is valid;
	// approval.ErrResolved, ErrExpired, ErrConflict, ErrHashMismatch;
	// approval.ErrSelfReview, ErrNotEligible. pinnedHash is "" or the
	// arguments hash the reviewer saw.
	Review(ctx context.Context, id approval.ID, reviewer approval.Principal, v approval.Verdict, reason, pinnedHash string) (approval.Request, error)
	// ReviewIf is Review that first runs allow on the request as stored,
	// where the verdict is recorded (after the tenant check); an error
	// from allow is returned as is and nothing is recorded.
	ReviewIf(ctx context.Context, id approval.ID, reviewer approval.Principal, v approval.Verdict, reason, pinnedHash string, allow func(approval.Request) error) (approval.Request, error)
}

// An Authenticator maps a bearer token to its principal and roles. ok is
// false for an unknown token. It must be safe for concurrent use and should
// compare tokens in constant time.
type Authenticator func(token string) (p approval.Principal, roles []string, ok bool)

// Roles an [Authenticator] may return (DESIGN "Roles").
const (
	RoleViewer   = "viewer"   // reads approvals
	RoleApprover = "approver" // reads and reviews approvals
	RoleAdmin    = "admin"    // everything
	RoleHost     = "host"     // creates, reads, changes and revokes sessions
)

var (
	readRoles   = []string{RoleViewer, RoleApprover, RoleAdmin}
	reviewRoles = []string{RoleApprover, RoleAdmin}
)

// Options configures a Server. A nil *Options gives the defaults.
type Options struct {
	// Logger receives request errors; default discard. Tokens and arguments
	// are never logged.
	Logger *slog.Logger
	// Ready reports whether the server can do its work (e.g. the store
	// answers); /readyz answers 503 with its error's text, which is public.
	// Default: always ready.
	Ready func(ctx context.Context) error
	// Upstreams, when set, reports the upstream servers' states by name
	// for /readyz, which answers 503 while a required one is not
	// connected (readiness.go).
	Upstreams func() map[string]UpstreamState
	// Metrics, when not nil, is served at GET /metrics without auth.
	Metrics http.Handler
	// Now is the clock for the Date header; default time.Now.
	Now func() time.Time
	// Sessions, when set, serves the session routes (/v1/sessions...);
	// without it they are 404.
	Sessions Sessions
	// SessionsChanged, when set, is called after a request changed what
	// some sessions may see (a revocation), so the agent side can notify
	// their MCP clients.
	SessionsChanged func()
	// Policies, when set, serves the deployment policy routes
	// (/v1/policy...; policy.source: store); without it they are 404.
	Policies Policies
	// Explain, when set, serves POST /v1/policy/explain (any policy
	// source); without it the route is 404.
	Explain Explainer
	// Events, when set, serves GET /v1/events and GET /v1/events/stream
	// from this change feed; without it they are 404.
	Events EventLog
	// EventsChanged, when set, returns a channel closed at the next change
	// of the event log (see [Broadcast.Wait]), so streams send new events
	// at once; they also re-read the log every EventPoll.
	EventsChanged func() <-chan struct{}
	// EventPoll is how often an event stream re-reads the log without a
	// wake-up; default 2s. Heartbeat is the interval of the stream's
	// comment lines; default 15s.
	EventPoll time.Duration
	Heartbeat time.Duration
	// Profiling serves Go's runtime profiles at /debug/pprof/ to the admin
	// role (pprof.go); without it the routes are 404.
	Profiling bool
	// Grants, when set, serves the grant routes (/v1/grants...) and
	// approvals with a grant attached; without it those routes are 404 and
	// an approve body with a grant is 422.
	Grants Grants
	// Audit, when set, serves GET /v1/audit (the audit chain as JSON
	// Lines); without it the route is 404.
	Audit Audit
}

// Server is the admin HTTP API. It implements http.Handler and is safe for
// concurrent use.
type Server struct {
	approvals Approvals
	sessions  Sessions
	policies  Policies
	explainer Explainer
	grants    Grants
	audit     Audit
	changed   func()
	auth      Authenticator
	log       *slog.Logger
	ready     func(ctx context.Context) error
	upstreams func() map[string]UpstreamState
	now       func() time.Time
	mux       *http.ServeMux
	// agentSide is set on the server behind AgentSessions: its refusals
	// are the agent listener's, not the admin API's, in the log.
	agentSide bool

	events        EventLog
	eventsChanged func() <-chan struct{}
	eventPoll     time.Duration
	heartbeat     time.Duration
	streamsDone   chan struct{} // closed by EndStreams
	endOnce       sync.Once

	// listWriters keeps the *listWriter of GET /v1/approvals (its
	// buffers) from one page to the next (liststream.go).
	listWriters sync.Pool
}

// New returns a Server over a, authenticating with auth. A nil auth rejects
// every token (fail closed).
func New(a Approvals, auth Authenticator, opts *Options) *Server {
	s := newBare(a, auth, opts)
	s.mux.Handle("GET /healthz", s.handle(s.healthz))
	s.mux.Handle("GET /readyz", s.handle(s.readyz))
	if opts != nil && opts.Metrics != nil {
		s.mux.Handle("GET /metrics", opts.Metrics)
	}
	s.mux.Handle("GET /v1/approvals", s.handle(s.require(readRoles, s.list)))
	s.mux.Handle("GET /v1/approvals/{id}", s.handle(s.require(readRoles, s.get)))
	s.mux.Handle("POST /v1/approvals/{id}/approve", s.handle(s.require(reviewRoles, s.approve)))
	s.mux.Handle("POST /v1/approvals/{id}/deny", s.handle(s.require(reviewRoles, s.deny)))
	if s.sessions != nil {
		s.routeSessions()
	}
	if s.policies != nil {
		s.routePolicy()
	}
	if s.explainer != nil {
		s.mux.Handle("POST /v1/policy/explain", s.handle(s.require(readRoles, s.explainPolicy)))
	}
	s.routeEvents()
	if opts != nil && opts.Profiling {
		s.routeProfiling()
	}
	if s.grants != nil {
		s.routeGrants()
	}
	if s.audit != nil {
		s.mux.Handle("GET /v1/audit", s.handle(s.require(auditRoles, s.exportAudit)))
	}
	return s
}

// newBare returns a Server with its options applied and no routes.
func newBare(a Approvals, auth Authenticator, opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if auth == nil {
		auth = func(string) (approval.Principal, []string, bool) { return approval.Principal{}, nil, false }
	}
	if o.EventPoll <= 0 {
		o.EventPoll = defaultEventPoll
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaultEventHeartbeat
	}
	return &Server{approvals: a, sessions: o.Sessions, policies: o.Policies, explainer: o.Explain, grants: o.Grants, audit: o.Audit, changed: o.SessionsChanged, auth: auth, log: o.Logger,
		ready: o.Ready, upstreams: o.Upstreams, now: o.Now, mux: http.NewServeMux(),
		events: o.Events, eventsChanged: o.EventsChanged, eventPoll: o.EventPoll, heartbeat: o.Heartbeat, streamsDone: make(chan struct{})}
}

// afterSessions runs Options.SessionsChanged, if set.
func (s *Server) afterSessions() {
	if s.changed != nil {
		s.changed()
	}
}

// ServeHTTP routes r. Unknown paths and methods get the JSON error envelope
// too (404 not_found, 405 method_not_allowed with an Allow header).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.serveMux(s.mux, w, r)
}

// serveMux serves r through mux, answering unknown routes in the JSON
// error format.
func (s *Server) serveMux(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Date", s.now().UTC().Format(http.TimeFormat))
	if h, pattern := mux.Handler(r); pattern == "" {
		// The mux has no route: learn whether it would say 404 or 405 and
		// answer in our format instead of its plain text.
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		e := &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Msg: "no such route"}
		if rec.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", rec.header.Get("Allow"))
			e = &apiError{Status: http.StatusMethodNotAllowed, Code: CodeMethod, Msg: "method not allowed"}
		}
		s.writeError(w, r, e)
		return
	}
	mux.ServeHTTP(w, r)
}

// statusRecorder captures the status and headers of the mux's own 404/405.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusRecorder) WriteHeader(status int)      { s.status = status }

// caller is the authenticated principal of a request.
type caller struct {
	principal approval.Principal
	roles     []string
}

// handle adapts an error-returning handler; it is the one writer of errors.
func (s *Server) handle(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, toAPIError(err))
		}
	})
}

// unknownAdminToken is the 401 message for a token the admin API does not
// know. It says which token belongs here, since the one a new user most
// often sends by mistake is the agent's (--dev prints both, alike), and
// the next is the one an earlier serve --dev printed.
const unknownAdminToken = "unknown token: the admin API takes an approver's token (approvers[] in the config, or the approver token the running serve --dev printed: each start prints new ones), not an agent's"

// require authenticates the request and checks that the caller has one of
// roles before calling h.
func (s *Server) require(roles []string, h func(w http.ResponseWriter, r *http.Request, c caller) error) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			return &apiError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Msg: "missing bearer token"}
		}
		p, have, ok := s.auth(token)
		if !ok {
			return &apiError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Msg: unknownAdminToken}
		}
		if !slices.ContainsFunc(have, func(role string) bool { return slices.Contains(roles, role) }) {
			return &apiError{Status: http.StatusForbidden, Code: CodeForbidden, Msg: needsRoles(roles)}
		}
		if err := h(w, r, caller{principal: p, roles: have}); err != nil {
			// The refusal's log line names who was refused (newuser50:
			// "self_review" without the approver's id told a security
			// lead that someone tried to approve their own agent's call,
			// not who).
			e := toAPIError(err)
			e.Principal = p.ID
			return e
		}
		return nil
	}
}

// bearer returns the token of an "Authorization: Bearer <token>" header; the
// scheme is case-insensitive.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Log keys.
const (
	keyMethod    = "method"
	keyPath      = "path"
	keyStatus    = "status"
	keyCode      = "code"
	keyErr       = "err"
	keyApproval  = "approval"
	keyPrincipal = "principal"
	keyRemote    = "remote"
	keySent      = "sent_approvals"
)

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, e *apiError) {
	level := slog.LevelDebug
	switch {
	case e.Status >= 500:
		level = slog.LevelError
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		level = slog.LevelWarn
	}
	attrs := []any{keyMethod, r.Method, keyPath, r.URL.Path, keyStatus, e.Status, keyCode, e.Code}
	if e.Principal != "" {
		attrs = append(attrs, keyPrincipal, e.Principal)
	}
	if e.Err != nil {
		attrs = append(attrs, keyErr, e.Err)
	}
	msg := "admin request failed"
	if s.agentSide {
		// The agent listener's /v1/ routes (AgentSessions): a refusal
		// there is an agent's request refused, not an admin's.
		msg = "agent listener request refused"
		if e.Status >= 500 {
			msg = "agent listener request failed"
		}
		attrs = append(attrs, "listener", "agent")
	}
	s.log.Log(r.Context(), level, msg, attrs...)
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
	}
	s.writeJSON(w, r, e.Status, ErrorBody{Error: ErrorDetail{Code: e.Code, Message: e.Msg}})
}

// writeJSON writes v with status, with hidden characters escaped.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// No HTML escaping: a reviewer must see "&&", "<" and ">" in a shell
	// command as they are, not as \u0026 (this is an API, not a page).
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		s.log.ErrorContext(r.Context(), "encode response", keyPath, r.URL.Path, keyErr, err)
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"internal error"}}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(EscapeJSON(buf.Bytes()))
}

// healthzBody is /healthz's answer, as writeJSON wrote it from
// {"status": "ok"}: the process runs, nothing else is checked (/readyz
// asks the store).
var healthzBody = []byte(`{"status":"ok"}` + "\n")

// jsonHeaders are the values writeJSON sets, shared by every /healthz
// answer: net/http only reads a response's header values, so one slice per
// header serves every probe (a liveness probe may come many times a
// second, while 10,000 calls are held; docs/performance.md, "held23").
var (
	hdrJSON    = []string{"application/json"}
	hdrNoStore = []string{"no-store"}
	hdrNosniff = []string{"nosniff"}
)

// healthz answers with the fixed body and writeJSON's headers, built once:
// no map, encoder or buffer per probe.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) error {
	h := w.Header()
	h["Content-Type"] = hdrJSON
	h["Cache-Control"] = hdrNoStore
	h["X-Content-Type-Options"] = hdrNosniff
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(healthzBody)
	return nil
}
