package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// Sessions is what the API needs for agent sessions. *gate.Gate implements
// it. Implementations must be safe for concurrent use.
type Sessions interface {
	// CreateSession creates a root session for a host, or a child when
	// actor is a session (actor.SessionID set), and returns it with its
	// token (shown once). Errors: session.ErrWiden (a *session.WidenError),
	// ErrBadRef, ErrUnknownServer, ErrRevoked; store errors.
	CreateSession(ctx context.Context, actor approval.Principal, req session.NewSession) (session.Session, string, error)
	// SessionChain returns the session and its ancestors, or an error
	// wrapping store.ErrNotFound.
	SessionChain(ctx context.Context, id session.ID) (session.Chain, error)
	// SetSessionRequirement sets one server's approval requirement if the
	// revision is ifMatch. Errors: session.ErrStaleRevision, ErrRevoked,
	// ErrUnknownServer, ErrBadRef, store.ErrNotFound.
	SetSessionRequirement(ctx context.Context, actor approval.Principal, id session.ID, server string, r session.Requirement, ifMatch int64) (session.Session, bool, error)
	// RevokeSession revokes the session and its descendants and cancels
	// their pending approvals; store.ErrNotFound for an unknown id.
	RevokeSession(ctx context.Context, actor approval.Principal, id session.ID) (store.Revocation, error)
}

// AgentAuthenticator maps an agent-side bearer token to its principal; ok
// is false for an unknown token. A session token gives a principal with
// SessionID set.
type AgentAuthenticator func(token string) (p approval.Principal, ok bool)

var (
	hostRoles        = []string{RoleHost, RoleAdmin}
	sessionReadRoles = []string{RoleHost, RoleAdmin, RoleViewer, RoleApprover}
)

// CreateSessionBody is the body of POST /v1/sessions. Tools absent or null
// means not given (default mode for a root, inherited for a child); [] means
// no tools. OnBehalfOf is only accepted on the admin listener.
type CreateSessionBody struct {
	Tools           *[]string                      `json:"tools"`
	RequireApproval map[string]session.Requirement `json:"require_approval,omitempty"`
	OnBehalfOf      string                         `json:"on_behalf_of,omitempty"`
}

// CreatedSession answers POST /v1/sessions (201). Token is shown only here.
type CreatedSession struct {
	ID      string  `json:"id"`
	Token   string  `json:"token"`
	Session Session `json:"session"`
	// Warnings name approvals of the policy in force whose quorum the
	// session's requests can never reach (its on_behalf_of may not review
	// them, and too few others may): such calls are refused when made.
	// Absent when there is none or Sessions cannot tell.
	Warnings []string `json:"warnings,omitempty"`
}

// sessionWarner is the optional part of Sessions that warns about a new
// session (*gate.Gate has it: SessionWarnings).
type sessionWarner interface {
	SessionWarnings(s session.Session) []string
}

// Session is the JSON form of a session: its own settings, its effective
// policy and where each part comes from.
type Session struct {
	ID              string                         `json:"id"`
	ParentID        string                         `json:"parent_id,omitempty"`
	Principal       string                         `json:"principal"`
	Tenant          string                         `json:"tenant,omitempty"`
	OnBehalfOf      string                         `json:"on_behalf_of,omitempty"`
	Mode            session.Mode                   `json:"mode"`
	Tools           []string                       `json:"tools"`
	RequireApproval map[string]session.Requirement `json:"require_approval"`
	Revision        int64                          `json:"revision"`
	CreatedAt       time.Time                      `json:"created_at"`
	CreatedBy       string                         `json:"created_by"`
	RevokedAt       time.Time                      `json:"revoked_at,omitzero"`
	Effective       Effective                      `json:"effective"`
	// Ancestors lists the parent first and the root last, with their own
	// settings: the provenance of the effective policy.
	Ancestors []Ancestor `json:"ancestors"`
}

// Effective is a session's effective policy.
type Effective struct {
	// Revoked is true when the session or an ancestor was revoked.
	Revoked bool `json:"revoked"`
	// Tools is null while the session tracks the deployment's exposed
	// tools (ToolsFrom "deployment"), else the refs it may call, from the
	// nearest explicit session (ToolsFrom is its id).
	Tools     []string `json:"tools"`
	ToolsFrom string   `json:"tools_from"`
	// RequireApproval is the union of the session's and its ancestors'.
	RequireApproval map[string]session.Requirement `json:"require_approval"`
}

// Ancestor is one ancestor's own settings.
type Ancestor struct {
	ID              string                         `json:"id"`
	Mode            session.Mode                   `json:"mode"`
	Tools           []string                       `json:"tools"`
	RequireApproval map[string]session.Requirement `json:"require_approval"`
	RevokedAt       time.Time                      `json:"revoked_at,omitzero"`
}

// RequirementChange answers PUT .../require-approval.
type RequirementChange struct {
	Changed       bool   `json:"changed"`
	EffectiveFrom string `json:"effective_from"` // always "next_call"
	Revision      int64  `json:"revision"`
}

// Revoked answers DELETE /v1/sessions/{id}: the sessions revoked by this
// request (none when it was already revoked), the pending approvals it
// cancelled and the approved ones (not used yet) it invalidated.
type Revoked struct {
	Revoked     []string `json:"revoked"`
	Cancelled   []string `json:"cancelled_approvals"`
	Invalidated []string `json:"invalidated_approvals"`
}

func fromChain(c session.Chain) Session {
	s := c[0]
	out := Session{
		ID: string(s.ID), ParentID: string(s.ParentID), Principal: s.Principal, Tenant: s.Tenant,
		OnBehalfOf: s.OnBehalfOf, Mode: s.Mode, Tools: s.Tools, RequireApproval: orEmpty(s.RequireApproval),
		Revision: s.Revision, CreatedAt: s.CreatedAt, CreatedBy: s.CreatedBy, RevokedAt: s.RevokedAt,
		Ancestors: []Ancestor{},
	}
	out.Effective = Effective{Revoked: c.Revoked(), ToolsFrom: "deployment", RequireApproval: orEmpty(c.Requirements())}
	if refs, from, ok := c.EffectiveTools(); ok {
		out.Effective.Tools, out.Effective.ToolsFrom = refs, string(from)
	}
	for _, a := range c[1:] {
		out.Ancestors = append(out.Ancestors, Ancestor{ID: string(a.ID), Mode: a.Mode, Tools: a.Tools,
			RequireApproval: orEmpty(a.RequireApproval), RevokedAt: a.RevokedAt})
	}
	return out
}

func orEmpty(m map[string]session.Requirement) map[string]session.Requirement {
	if m == nil {
		return map[string]session.Requirement{}
	}
	return m
}

// routeSessions mounts the admin listener's session routes.
func (s *Server) routeSessions() {
	s.mux.Handle("POST /v1/sessions", s.handle(s.require(hostRoles, s.createRoot)))
	s.mux.Handle("GET /v1/sessions/{id}", s.handle(s.require(sessionReadRoles, s.getSession)))
	s.mux.Handle("DELETE /v1/sessions/{id}", s.handle(s.require(hostRoles, s.revokeSession)))
	s.mux.Handle("PUT /v1/sessions/{id}/servers/{server}/require-approval", s.handle(s.require(hostRoles, s.putRequirement)))
}

func (s *Server) createRoot(w http.ResponseWriter, r *http.Request, c caller) error {
	var body CreateSessionBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	return createSession(r.Context(), s.sessions, c.principal, body, func(status int, v any) { s.writeJSON(w, r, status, v) })
}

func createSession(ctx context.Context, ss Sessions, actor approval.Principal, body CreateSessionBody, write func(int, any)) error {
	req := session.NewSession{RequireApproval: body.RequireApproval, OnBehalfOf: body.OnBehalfOf}
	if body.Tools != nil {
		req.Tools = *body.Tools
		if req.Tools == nil {
			req.Tools = []string{}
		}
	}
	created, token, err := ss.CreateSession(ctx, actor, req)
	if err != nil {
		return sessionError(err)
	}
	chain, err := ss.SessionChain(ctx, created.ID)
	if err != nil {
		return sessionError(err)
	}
	out := CreatedSession{ID: string(created.ID), Token: token, Session: fromChain(chain)}
	if w, ok := ss.(sessionWarner); ok {
		out.Warnings = w.SessionWarnings(created)
	}
	write(http.StatusCreated, out)
	return nil
}

// sessionChain reads the chain of the {id} in the path, as c may see it:
// another tenant's session is 404.
func (s *Server) sessionChain(r *http.Request, c caller) (session.Chain, error) {
	raw := r.PathValue("id")
	id := strings.ToLower(raw)
	if !isUUID(id) {
		return nil, noSession(raw)
	}
	ch, err := s.sessions.SessionChain(r.Context(), session.ID(id))
	if err != nil {
		return nil, sessionError(err)
	}
	if c.principal.Tenant != "" && ch[0].Tenant != c.principal.Tenant {
		return nil, noSession(raw)
	}
	return ch, nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, c caller) error {
	ch, err := s.sessionChain(r, c)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(ch[0].Revision, 10)))
	s.writeJSON(w, r, http.StatusOK, fromChain(ch))
	return nil
}

func (s *Server) revokeSession(w http.ResponseWriter, r *http.Request, c caller) error {
	ch, err := s.sessionChain(r, c)
	if err != nil {
		return err
	}
	rev, err := s.sessions.RevokeSession(r.Context(), c.principal, ch[0].ID)
	if err != nil {
		return sessionError(err)
	}
	out := Revoked{Revoked: []string{}, Cancelled: []string{}, Invalidated: []string{}}
	for _, x := range rev.Sessions {
		out.Revoked = append(out.Revoked, string(x.ID))
	}
	for _, x := range rev.Cancelled {
		out.Cancelled = append(out.Cancelled, string(x))
	}
	for _, x := range rev.Invalidated {
		out.Invalidated = append(out.Invalidated, string(x))
	}
	if len(rev.Sessions) > 0 {
		s.afterSessions()
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) putRequirement(w http.ResponseWriter, r *http.Request, c caller) error {
	ch, err := s.sessionChain(r, c)
	if err != nil {
		return err
	}
	rev, err := ifMatch(r)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := decodeBody(w, r, &raw); err != nil {
		return err
	}
	if raw == nil {
		return invalid("body: want true, false or a list of tool names")
	}
	var req session.Requirement
	if err := json.Unmarshal(raw, &req); err != nil {
		return invalid("body: %v", err)
	}
	got, changed, err := s.sessions.SetSessionRequirement(r.Context(), c.principal, ch[0].ID, r.PathValue("server"), req, rev)
	if err != nil {
		return sessionError(err)
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(got.Revision, 10)))
	s.writeJSON(w, r, http.StatusOK, RequirementChange{Changed: changed, EffectiveFrom: "next_call", Revision: got.Revision})
	return nil
}

// ifMatch reads the revision in If-Match: a number, optionally quoted
// (an ETag as GET returns it). Missing is 428, malformed 422.
func ifMatch(r *http.Request) (int64, error) {
	v := strings.TrimSpace(r.Header.Get("If-Match"))
	if v == "" {
		return 0, &apiError{Status: http.StatusPreconditionRequired, Code: CodePrecondition, Msg: "If-Match with the session's revision is required"}
	}
	v = strings.Trim(strings.TrimPrefix(v, "W/"), `"`)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, invalid("If-Match %q: want the session's revision, a positive number", r.Header.Get("If-Match"))
	}
	return n, nil
}

// AgentSessions is the agent-side session API, mounted next to /mcp on the
// agent listener: POST /v1/sessions, authenticated by a session token,
// creates a child of that session. Agent (non-session) tokens get 403:
// root sessions are created on the admin listener by role host; admin
// tokens are never accepted here. It implements http.Handler.
type AgentSessions struct {
	srv  *Server
	auth AgentAuthenticator
	mux  *http.ServeMux
}

// NewAgentSessions returns the agent-side session API over ss; opts gives
// its logger and clock (opts.Sessions is ignored). A nil auth rejects every
// token.
func NewAgentSessions(ss Sessions, auth AgentAuthenticator, opts *Options) *AgentSessions {
	if auth == nil {
		auth = func(string) (approval.Principal, bool) { return approval.Principal{}, false }
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Sessions = ss
	a := &AgentSessions{srv: newBare(nil, nil, &o), auth: auth, mux: http.NewServeMux()}
	a.srv.agentSide = true
	a.mux.Handle("POST /v1/sessions", a.srv.handle(a.createChild))
	a.mux.Handle("POST /v1/sessions/{id}/policy-requests", a.srv.handle(a.requestPolicy))
	return a
}

// ServeHTTP routes r; other paths and methods get the JSON error envelope.
func (a *AgentSessions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.srv.serveMux(a.mux, w, r)
}

func (a *AgentSessions) createChild(w http.ResponseWriter, r *http.Request) error {
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return &apiError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Msg: "missing bearer token"}
	}
	p, ok := a.auth(token)
	if !ok {
		return &apiError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Msg: "unknown token"}
	}
	if p.SessionID == "" {
		return &apiError{Status: http.StatusForbidden, Code: CodeForbidden,
			Msg: "only a session token can create a child session here; root sessions are created on the admin listener by a host"}
	}
	var body CreateSessionBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	if body.OnBehalfOf != "" {
		return invalid("on_behalf_of: a child session acts for its parent's principal")
	}
	a.srv.log.Log(r.Context(), slog.LevelDebug, "child session requested", keyPrincipal, p.ID)
	return createSession(r.Context(), a.srv.sessions, p, body, func(status int, v any) { a.srv.writeJSON(w, r, status, v) })
}

// noSession is the 404 of an unknown session id.
func noSession(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Msg: fmt.Sprintf("no session %q", id)}
}
