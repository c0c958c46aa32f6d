package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// MaxBodyBytes is the largest request body the admin API reads; a larger
// one is answered 413.
const MaxBodyBytes = 64 << 10

// Limits on input.
const (
	maxLimit     = 1000 // ?limit=
	maxCursor    = 2048 // bytes of ?cursor= (a list position with store.MaxOpenTransactions open is about 1,700)
	maxReason    = 2000 // bytes of a review reason
	idLen        = 36   // canonical UUID text
	hashPrefix   = "sha256:"
	hashHexchars = 64
)

var states = []approval.State{
	approval.StatePending, approval.StateApproved, approval.StateDenied, approval.StateExpired,
	approval.StateCancelled, approval.StateConsumed, approval.StateInvalidated,
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, c caller) error {
	q := r.URL.Query()
	f := store.Filter{Tenant: c.principal.Tenant}
	switch st := q.Get("state"); st {
	case "", "all":
	default:
		if !isState(st) {
			return invalid("state %q: want all or one of %s", st, stateNames())
		}
		f.State = approval.State(st)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return invalid("limit %q: want a number from 1 to %d", v, maxLimit)
		}
		f.Limit = n
	}
	switch o := q.Get("order"); o {
	case "", "oldest":
	case "newest":
		f.Descending = true
	default:
		return invalid("order %q: want oldest (the default) or newest", o)
	}
	cursor, err := listCursor(q)
	if err != nil {
		return err
	}
	f.Cursor = cursor
	f.IDPrefix = strings.ToLower(q.Get("id_prefix"))
	if len(f.IDPrefix) > idLen || strings.Trim(f.IDPrefix, "0123456789abcdef-") != "" {
		return invalid("id_prefix %q: want at most %d hex digits and dashes", f.IDPrefix, idLen)
	}
	f.IDSuffix = strings.ToLower(q.Get("id_suffix"))
	if len(f.IDSuffix) > idLen || strings.Trim(f.IDSuffix, "0123456789abcdef-") != "" {
		return invalid("id_suffix %q: want at most %d hex digits and dashes", f.IDSuffix, idLen)
	}
	return s.streamList(w, r, c, f)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, c caller) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	a, err := s.lookup(r.Context(), c, id)
	if err != nil {
		return err
	}
	out := fromRequest(a)
	s.heldAs(r.Context(), &out)
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request, c caller) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var body ApproveBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	if h := body.ArgumentsHash; h != "" && !IsArgumentsHash(h) {
		return invalid("arguments_hash %q: want %q and %d lower-case hex digits", h, hashPrefix, hashHexchars)
	}
	if body.Grant != nil {
		return s.approveGranting(w, r, c, id, body)
	}
	return s.review(w, r, c, id, approval.VerdictApprove, body.Reason, body.ArgumentsHash)
}

func (s *Server) deny(w http.ResponseWriter, r *http.Request, c caller) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var body DenyBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	if strings.TrimSpace(body.Reason) == "" {
		// The agent reads the reason; a bare "denied" teaches it nothing.
		return invalid(`a deny needs a "reason": the agent reads it`)
	}
	return s.review(w, r, c, id, approval.VerdictDeny, body.Reason, "")
}

// review records verdict v by the caller and answers with the request. A
// repeated identical verdict is a success that returns the current request.
//
// The decision's write is asked whether the request holds a task
// (store.TaskProbe), for the answer's held_as: a store that reads it in
// the decision's transaction saves heldAs a read of its own.
func (s *Server) review(w http.ResponseWriter, r *http.Request, c caller, id approval.ID, v approval.Verdict, reason, pinnedHash string) error {
	ctx := store.WithTaskProbe(r.Context(), &store.TaskProbe{ID: id})
	got, dup, err := s.decide(ctx, c, id, v, reason, pinnedHash)
	if err != nil {
		return err
	}
	out := fromRequest(got)
	out.Duplicate = dup
	s.heldAs(ctx, &out)
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// decide is the one review path of the REST API and the web inbox: it
// records verdict v by c (a repeated identical verdict returns the current
// request and dup true), applies an approved policy change, and returns
// the request after the change. Errors are *apiError or map through toAPIError; a 409
// names the current state (or hash).
func (s *Server) decide(ctx context.Context, c caller, id approval.ID, v approval.Verdict, reason, pinnedHash string) (got approval.Request, dup bool, err error) {
	if len(reason) > maxReason {
		return approval.Request{}, false, invalid("reason longer than %d bytes", maxReason)
	}
	// Another tenant's request is 404 before anything else is revealed
	// (the gate checks the tenant first), then the kind is checked, in the
	// transaction that records the verdict: no read of its own first.
	got, err = s.approvals.ReviewIf(ctx, id, c.principal, v, reason, pinnedHash, func(cur approval.Request) error {
		if cur.Kind == approval.KindPolicyChange {
			// Deciding a deployment policy change is changing it.
			return requireDeployment(c)
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return approval.Request{}, false, &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Msg: fmt.Sprintf("no approval %s", id), Err: err}
	}
	if errors.Is(err, approval.ErrDuplicate) {
		if got.ID == "" {
			if got, err = s.lookup(ctx, c, id); err != nil {
				return approval.Request{}, false, err
			}
		}
		dup, err = true, nil
	}
	if err != nil {
		e := toAPIError(fmt.Errorf("review %s: %w", id, err))
		if e.Status == http.StatusConflict {
			s.describeConflict(ctx, id, e)
		}
		return approval.Request{}, false, e
	}
	return s.applyApprovedPolicy(ctx, c, got), dup, nil
}

// describeConflict adds the request's current state and who decided it
// (or, for a hash mismatch, its hash) to e's public message, and that
// nothing was recorded; best effort.
func (s *Server) describeConflict(ctx context.Context, id approval.ID, e *apiError) {
	cur, err := s.approvals.Get(ctx, id)
	if err != nil {
		return
	}
	if e.Code == CodeHashMismatch {
		e.Msg += fmt.Sprintf(" (the request's hash is %s)", cur.ArgumentsHash)
		return
	}
	if cur.DecidedBy != "" {
		e.Msg += fmt.Sprintf(" (state: %s, decided by %s): nothing was recorded", cur.State, cur.DecidedBy)
		return
	}
	e.Msg += fmt.Sprintf(" (state: %s): nothing was recorded", cur.State)
}

// lookup gets id, hiding other tenants' requests as not found.
func (s *Server) lookup(ctx context.Context, c caller, id approval.ID) (approval.Request, error) {
	a, err := s.approvals.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return approval.Request{}, &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Msg: fmt.Sprintf("no approval %s", id), Err: err}
	}
	if err != nil {
		return approval.Request{}, fmt.Errorf("get approval %s: %w", id, err)
	}
	if !visible(c, a) {
		return approval.Request{}, notFound(string(id))
	}
	return a, nil
}

// visible reports whether c may see a: a principal with a tenant sees only
// its tenant's requests.
func visible(c caller, a approval.Request) bool {
	return c.principal.Tenant == "" || c.principal.Tenant == a.Tenant
}

// pathID returns the {id} path value, which must be a canonical UUID (upper
// case is lower-cased); anything else is 404.
func pathID(r *http.Request) (approval.ID, error) {
	raw := r.PathValue("id")
	id := strings.ToLower(raw)
	if !isUUID(id) {
		return "", notFullID("approval", "/v1/approvals", raw)
	}
	return approval.ID(id), nil
}

// notFullID answers a path id that is not a whole UUID: the CLI and the
// inbox take a short id, but the REST path does not, so the message says
// how to find the whole one (the list's id_prefix and id_suffix).
func notFullID(kind, list, raw string) *apiError {
	return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Msg: fmt.Sprintf(
		"no %s %q: the path takes the whole %s id (36 characters); find it from a part with GET %s?id_prefix= or ?id_suffix=",
		kind, raw, kind, list)}
}

// isUUID reports whether s is lower-case 8-4-4-4-12 hex.
func isUUID(s string) bool {
	if len(s) != idLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

// IsArgumentsHash reports whether h has the form of an arguments hash:
// "sha256:" and 64 lower-case hex digits (approval.Hash's form; what the
// approve and grant endpoints accept as arguments_hash).
func IsArgumentsHash(h string) bool {
	hex, ok := strings.CutPrefix(h, hashPrefix)
	if !ok || len(hex) != hashHexchars {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if !isHex(hex[i]) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

func isState(s string) bool {
	for _, st := range states {
		if string(st) == s {
			return true
		}
	}
	return false
}

func stateNames() string {
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// decodeBody decodes the request body strictly into v: at most MaxBodyBytes
// bytes (413), one JSON object with known fields and nothing after it, no
// key given twice, no unpaired surrogate or invalid UTF-8, no two keys
// that differ only in case, and field names in their exact case (422; see
// checkKeys). An empty body leaves v
// unchanged.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return &apiError{Status: http.StatusBadRequest, Code: CodeInvalid, Msg: "cannot read the body", Err: err}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	// What encoding/json accepts but approval.Canonicalize refuses, as it
	// refuses tool arguments, is refused: a key given twice (decoded
	// last-one-wins), an unpaired surrogate or invalid UTF-8 (silently
	// replaced by U+FFFD). Refusing only ErrDuplicateKey let a surrogate
	// ahead of a duplicate key hide it. Invalid JSON gets the decoder's
	// error below.
	if _, err := approval.Canonicalize(data); err != nil && json.Valid(data) {
		return invalid("invalid body: %v", err)
	}
	// Nor may keys differ only in case, or name a field in another case
	// (encoding/json would match them to a field anyway).
	if json.Valid(data) {
		if err := checkKeys(data, reflect.TypeOf(v)); err != nil {
			return invalid("invalid body: %v", err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("invalid body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("invalid body: data after the JSON object")
	}
	return nil
}

// isIDText reports whether s could be (a prefix of) an approval id:
// lowercase hex digits and dashes, at most 36 characters.
func isIDText(s string) bool {
	if len(s) > 36 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && c != '-' {
			return false
		}
	}
	return true
}

// TaskHolder is the optional part of [Approvals] that says whether a
// request holds a call made as an MCP task. *gate.Gate implements it.
type TaskHolder interface {
	HeldAsTask(ctx context.Context, id approval.ID) (bool, error)
}

// heldAs fills out.HeldAs when s's approvals can tell (TaskHolder): only a
// held tool call can be a task. A failed look-up is logged and leaves the
// field out (it only changes what the answer says about the call's
// caller, never a decision).
func (s *Server) heldAs(ctx context.Context, out *Approval) {
	th, ok := s.approvals.(TaskHolder)
	if !ok || out.Kind != "" || out.Mode != "hold" {
		return
	}
	task, err := th.HeldAsTask(ctx, approval.ID(out.ID))
	if err != nil {
		s.log.WarnContext(ctx, "cannot tell whether an approval holds a task", "approval", out.ID, keyErr, err)
		return
	}
	if task {
		out.HeldAs = HeldAsTask
	}
}

// listCursor returns the cursor= of a list's query (GET /v1/approvals,
// GET /v1/grants): "" for the first page, or a cursor the list returned
// (an opaque store.ListPosition, at most maxCursor bytes; the id that was
// a cursor before list orders is still one). Anything else is invalid
// (422).
func listCursor(q url.Values) (string, error) {
	c := q.Get("cursor")
	if len(c) > maxCursor {
		return "", invalid("cursor longer than %d bytes", maxCursor)
	}
	if _, err := store.ParseListCursor(c); err != nil {
		return "", invalid("cursor %q is not a cursor this API returned", c)
	}
	return c, nil
}
