package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/session"
)

// PolicyRequester is what the agent-side API needs for session policy
// requests; *gate.Gate implements it. NewAgentSessions mounts POST
// /v1/sessions/{id}/policy-requests when its Sessions implements it.
type PolicyRequester interface {
	// RequestSessionPolicy handles a session's request to change its own
	// policy (see gate.Gate.RequestSessionPolicy).
	RequestSessionPolicy(ctx context.Context, actor approval.Principal, id session.ID, ch session.Change) (gate.PolicyResult, error)
}

// Error codes of policy requests.
const (
	CodeCeiling      = "ceiling"               // 403: the change exceeds the session's ceiling
	CodeTooMany      = "too_many_pending"      // 429: too many pending policy requests
	CodePolicyDenied = "policy_request_denied" // 403: an approver denied the identical request
)

// PolicyRequestDenied is the 403 body of a denied policy request: the
// status answer (gate.PolicyAnswer) together with the error envelope.
type PolicyRequestDenied struct {
	gate.PolicyAnswer
	Error ErrorDetail `json:"error"`
}

// requestPolicy answers POST /v1/sessions/{id}/policy-requests: 200 with
// status "applied", 202 with "approval_required", 403 with "denied"
// (PolicyRequestDenied); 403 ceiling for a change past the ceiling, 403
// forbidden for another session's id or a token that is not a session's,
// 429 too_many_pending, 409 stale_revision, 422 for a malformed change.
func (a *AgentSessions) requestPolicy(w http.ResponseWriter, r *http.Request) error {
	pr, ok := a.srv.sessions.(PolicyRequester)
	if !ok {
		return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Msg: "policy requests are not available"}
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return &apiError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Msg: "missing bearer token"}
	}
	p, ok := a.auth(token)
	if !ok {
		return &apiError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Msg: "unknown token"}
	}
	id := strings.ToLower(r.PathValue("id"))
	if p.SessionID == "" || p.SessionID != id {
		return &apiError{Status: http.StatusForbidden, Code: CodeForbidden,
			Msg: "a session may only request changes of its own policy, with its own session token"}
	}
	var ch session.Change
	if err := decodeBody(w, r, &ch); err != nil {
		return err
	}
	a.srv.log.Log(r.Context(), slog.LevelDebug, "session policy requested", keyPrincipal, p.ID)
	res, err := pr.RequestSessionPolicy(r.Context(), p, session.ID(id), ch)
	if err != nil {
		return policyRequestError(err)
	}
	ans := res.Answer()
	switch res.Status {
	case gate.PolicyApprovalRequired:
		a.srv.writeJSON(w, r, http.StatusAccepted, ans)
	case gate.PolicyDenied:
		a.srv.writeJSON(w, r, http.StatusForbidden, PolicyRequestDenied{PolicyAnswer: ans, Error: ErrorDetail{Code: CodePolicyDenied, Message: ans.Message}})
	default:
		if res.Changed {
			a.srv.afterSessions()
		}
		a.srv.writeJSON(w, r, http.StatusOK, ans)
	}
	return nil
}

// policyRequestError maps the errors of RequestSessionPolicy.
func policyRequestError(err error) *apiError {
	var ce *session.CeilingError
	e := &apiError{Err: err}
	switch {
	case errors.As(err, &ce):
		e.Status, e.Code, e.Msg = http.StatusForbidden, CodeCeiling, ce.Error()
	case errors.Is(err, session.ErrCeiling):
		e.Status, e.Code, e.Msg = http.StatusForbidden, CodeCeiling, "the change exceeds the session's ceiling; nothing was applied"
	case errors.Is(err, gate.ErrNotOwnSession):
		e.Status, e.Code, e.Msg = http.StatusForbidden, CodeForbidden, gate.ErrNotOwnSession.Error()[len("gate: "):]
	case errors.Is(err, gate.ErrTooManyPolicyRequests):
		e.Status, e.Code, e.Msg = http.StatusTooManyRequests, CodeTooMany, strings.TrimPrefix(err.Error(), "gate: ")
	case errors.Is(err, gate.ErrPolicyChanged):
		e.Status, e.Code, e.Msg = http.StatusConflict, CodeStale, strings.TrimPrefix(gate.ErrPolicyChanged.Error(), "gate: ")
	case errors.Is(err, session.ErrStaleRevision):
		e.Status, e.Code, e.Msg = http.StatusConflict, CodeStale, "the session's policy changed while the request was handled; send it again"
	case errors.Is(err, session.ErrEmptyChange):
		e.Status, e.Code, e.Msg = http.StatusUnprocessableEntity, CodeInvalid, strings.TrimPrefix(err.Error(), "session: ")
	default:
		return sessionError(err)
	}
	return e
}
