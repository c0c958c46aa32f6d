package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"toolgate/internal/approval"
	"toolgate/internal/policystore"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// apiError is an error with its HTTP answer. Msg is public; Err is the cause,
// which is only logged.
type apiError struct {
	Status int
	Code   string
	Msg    string
	Err    error
	// Principal is the authenticated caller's id, for the log line
	// (Server.require sets it); empty before authentication.
	Principal string
}

func (e *apiError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, e.Code, e.Msg, e.Err)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Msg)
}

func (e *apiError) Unwrap() error { return e.Err }

func invalid(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusUnprocessableEntity, Code: CodeInvalid, Msg: fmt.Sprintf(format, args...)}
}

func notFound(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Msg: fmt.Sprintf("no approval %q", id)}
}

// toAPIError maps any handler error to its answer. This is the one place
// where errors become statuses; see the package doc for the table.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var tooLarge *http.MaxBytesError
	e := &apiError{Err: err}
	switch {
	case errors.As(err, &tooLarge):
		e.Status, e.Code, e.Msg = http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("body larger than %d bytes", tooLarge.Limit)
	case errors.Is(err, store.ErrNotFound):
		e.Status, e.Code, e.Msg = http.StatusNotFound, CodeNotFound, "no such approval"
	case errors.Is(err, approval.ErrSelfReview):
		e.Status, e.Code, e.Msg = http.StatusForbidden, CodeSelfReview, "you cannot review a call you requested or that acts for you"
	case errors.Is(err, approval.ErrNotEligible):
		e.Status, e.Code, e.Msg = http.StatusForbidden, CodeNotEligible, "you are not among the approvers of this request's rule"
	case errors.Is(err, approval.ErrHashMismatch):
		e.Status, e.Code, e.Msg = http.StatusConflict, CodeHashMismatch, "arguments_hash does not match the request's arguments"
	case errors.Is(err, approval.ErrExpired):
		e.Status, e.Code, e.Msg = http.StatusConflict, CodeExpired, "the request has expired"
	case errors.Is(err, approval.ErrResolved):
		e.Status, e.Code, e.Msg = http.StatusConflict, CodeResolved, "the request is no longer pending"
	case errors.Is(err, approval.ErrConflict):
		e.Status, e.Code, e.Msg = http.StatusConflict, CodeConflict, "you already gave the other verdict on this request, and it stands"
	case errors.Is(err, store.ErrInDoubt):
		e.Status, e.Code, e.Msg = http.StatusServiceUnavailable, CodeUnavailable, MsgInDoubt
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		e.Status, e.Code, e.Msg = http.StatusServiceUnavailable, CodeUnavailable, "the approval store is unavailable; try again"
	default:
		e.Status, e.Code, e.Msg = http.StatusInternalServerError, CodeInternal, "internal error"
	}
	return e
}

// MsgInDoubt is the message of a 503 answering a decision (approve, deny,
// revoke) whose store write may have committed: its COMMIT was sent and
// its answer lost, and the store could not learn its outcome
// (store.ErrInDoubt). A blind retry may then meet its own decision.
const MsgInDoubt = "the decision may have been recorded: read the approval before retrying"

// sessionError maps the errors of session operations: an unknown session
// is "no such session", and the session sentinels get their statuses; the
// rest goes through toAPIError.
func sessionError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var widen *session.WidenError
	var reqWiden *session.RequirementWidenError
	e := &apiError{Err: err}
	switch {
	case errors.As(err, &widen):
		e.Status, e.Code, e.Msg = http.StatusForbidden, CodeWiden, widen.Error()
	case errors.As(err, &reqWiden):
		e.Status, e.Code, e.Msg = http.StatusForbidden, CodeWiden, reqWiden.Error()
	case errors.Is(err, session.ErrWiden):
		e.Status, e.Code, e.Msg = http.StatusForbidden, CodeWiden, "child tools may only narrow the parent session tool policy"
	case errors.Is(err, session.ErrUnknownServer), errors.Is(err, session.ErrBadRef):
		e.Status, e.Code, e.Msg = http.StatusUnprocessableEntity, CodeInvalid, strings.TrimPrefix(err.Error(), "session: ")
	case errors.Is(err, session.ErrStaleRevision):
		e.Status, e.Code, e.Msg = http.StatusConflict, CodeStale, "If-Match is not the session's current revision; read it again"
	case errors.Is(err, session.ErrRevoked):
		e.Status, e.Code, e.Msg = http.StatusNotFound, CodeNotFound, "the session was revoked"
	case errors.Is(err, store.ErrNotFound):
		e.Status, e.Code, e.Msg = http.StatusNotFound, CodeNotFound, "no such session"
	case errors.Is(err, store.ErrInDoubt):
		e.Status, e.Code, e.Msg = http.StatusServiceUnavailable, CodeUnavailable, "the change may have been recorded: read the session before retrying"
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		e.Status, e.Code, e.Msg = http.StatusServiceUnavailable, CodeUnavailable, "the session store is unavailable; try again"
	default:
		return toAPIError(err)
	}
	return e
}

// policyError maps the errors of the policy routes; the rest goes through
// toAPIError.
func policyError(err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	e := &apiError{Err: err}
	switch {
	case errors.Is(err, policystore.ErrTenant):
		e.Status, e.Code, e.Msg = http.StatusForbidden, CodeForbidden, deploymentAdminOnly
	case errors.Is(err, policystore.ErrInvalid):
		e.Status, e.Code, e.Msg = http.StatusUnprocessableEntity, CodeInvalid, fmt.Sprint(err)
	case errors.Is(err, store.ErrConflict):
		e.Status, e.Code, e.Msg = http.StatusConflict, CodePolicyMoved, "the deployment policy is no longer at the base revision; read it again (a pending proposal on it is invalidated)"
	case errors.Is(err, approval.ErrNotApproved):
		e.Status, e.Code, e.Msg = http.StatusConflict, CodeNotApproved, "the proposal is not an approved policy change (pending, denied, expired, already applied or invalidated)"
	case errors.Is(err, store.ErrNotFound):
		e.Status, e.Code, e.Msg = http.StatusNotFound, CodeNotFound, "no such policy revision or proposal"
	default:
		return toAPIError(err)
	}
	return e
}
