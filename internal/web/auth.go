package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"toolgate/internal/api"
	"toolgate/internal/store"
)

// Cookie names. Both are HttpOnly, SameSite=Strict, Path=/ui/, and Secure
// over TLS or when the public URL is https.
const (
	sessionCookie = "toolgate_session" // the session secret; the store keeps its SHA-256
	signInCookie  = "toolgate_signin"  // the CSRF secret of the sign-in form (double submit)
)

// maxToken bounds the pasted token.
const maxToken = 4096

// session is a signed-in request: the approver, as the backend sees it, and
// the CSRF token of its forms.
type session struct {
	id     string // the store's id (hash of the cookie value)
	caller api.Caller
	csrf   string
	since  string // pages: the change feed's end (a cursor) before the page read its data
}

func (c *session) user() *user {
	return &user{ID: visible(c.caller.Principal.ID), Roles: strings.Join(c.caller.Roles, ", "), CanReview: c.caller.CanReview()}
}

// hashHex is the lowercase hex SHA-256 of s.
func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// csrfFor derives the CSRF token of a session from its cookie value: only
// the browser holding the cookie can know it, and the store, which keeps
// only the cookie's hash, cannot.
func csrfFor(cookieValue string) string {
	return hashHex("toolgate csrf\x00" + cookieValue)
}

// randomToken returns 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// errSignedOut means the request carries no valid session.
var errSignedOut = errors.New("web: not signed in")

// current returns the request's session: a cookie whose hash names an
// unexpired stored session, whose token the configuration still knows,
// with a role that reads approvals.
func (s *Server) current(r *http.Request) (*session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" || len(ck.Value) > 128 {
		return nil, errSignedOut
	}
	id := hashHex(ck.Value)
	ws, err := s.sessions.GetWebSession(r.Context(), id, s.now())
	if errors.Is(err, store.ErrNotFound) {
		return nil, errSignedOut
	}
	if err != nil {
		return nil, err
	}
	p, roles, ok := s.identify(ws.TokenHash)
	c := api.Caller{Principal: p, Roles: roles}
	if !ok || !c.CanRead() {
		// The token left the configuration or lost its role: the session
		// ends with it.
		if err := s.sessions.DeleteWebSession(r.Context(), id); err != nil {
			s.log.WarnContext(r.Context(), "cannot end a session whose token is gone", "err", err)
		}
		return nil, errSignedOut
	}
	return &session{id: id, caller: c, csrf: csrfFor(ck.Value)}, nil
}

// cookie returns a cookie of this inbox with value, living maxAge seconds
// (negative deletes it).
func (s *Server) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	//nolint:gosec // G124: HttpOnly and SameSite=Strict always; Secure whenever the inbox is reached over https (plain http works only on a loopback listener)
	return &http.Cookie{Name: name, Value: value, Path: "/ui/", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || s.secure}
}

// page wraps a GET page handler: signed-out visitors are sent to the
// sign-in form, which brings them back.
func (s *Server) page(h func(w http.ResponseWriter, r *http.Request, c *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := s.current(r)
		if errors.Is(err, errSignedOut) {
			http.Redirect(w, r, "/ui/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if err != nil {
			s.log.ErrorContext(r.Context(), "read inbox session", "err", err)
			s.errorPage(w, r, nil, http.StatusServiceUnavailable, "The approval store is unavailable; try again.")
			return
		}
		// Read before the page's data, so its stream starts early enough.
		if c.since, err = s.backend.EventsEnd(r.Context()); err != nil {
			s.log.WarnContext(r.Context(), "read the end of the change feed", "err", err)
		}
		h(w, r, c)
	}
}

// fragment wraps a handler the page's script calls: signed out is 401
// (the script then reloads, which leads to the sign-in form).
func (s *Server) fragment(h func(w http.ResponseWriter, r *http.Request, c *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := s.current(r)
		switch {
		case errors.Is(err, errSignedOut):
			http.Error(w, "signed out", http.StatusUnauthorized)
		case err != nil:
			http.Error(w, "the approval store is unavailable", http.StatusServiceUnavailable)
		default:
			h(w, r, c)
		}
	}
}

// post wraps every state-changing handler of a signed-in approver: the
// Origin must be this inbox's and the form's csrf field the session's
// token; otherwise 403 and nothing happens.
func (s *Server) post(h func(w http.ResponseWriter, r *http.Request, c *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if msg := s.checkOrigin(r); msg != "" {
			s.errorPage(w, r, nil, http.StatusForbidden, msg)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			s.errorPage(w, r, nil, http.StatusBadRequest, "The form could not be read.")
			return
		}
		c, err := s.current(r)
		if errors.Is(err, errSignedOut) {
			s.errorPage(w, r, nil, http.StatusForbidden, "You are signed out; nothing was changed. Sign in and try again.")
			return
		}
		if err != nil {
			s.errorPage(w, r, nil, http.StatusServiceUnavailable, "The approval store is unavailable; nothing was changed.")
			return
		}
		if !sameSecret(r.PostFormValue("csrf"), c.csrf) {
			s.log.WarnContext(r.Context(), "inbox POST without a valid CSRF token refused", "path", r.URL.Path, "principal", c.caller.Principal.ID)
			s.errorPage(w, r, c, http.StatusForbidden, "This form is missing its security token (or it is stale); nothing was changed. Reload the page and try again.")
			return
		}
		if c.since, err = s.backend.EventsEnd(r.Context()); err != nil {
			s.log.WarnContext(r.Context(), "read the end of the change feed", "err", err)
		}
		h(w, r, c)
	}
}

// maxForm bounds a POSTed form.
const maxForm = 64 << 10

// sameSecret compares two secrets in constant time; an empty one never
// matches.
func sameSecret(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// checkOrigin returns why a POST is refused for its origin, or "". The
// Origin header must name this inbox: the request's own origin (its Host,
// https over TLS) or the public URL's. Because every page is served with
// Referrer-Policy: no-referrer, browsers send "Origin: null" on form
// submissions (Fetch standard, "serializing a request origin"); such a
// request passes only when the browser itself attests it came from this
// origin with Sec-Fetch-Site: same-origin, a header pages cannot set. A
// request with neither a matching Origin nor that attestation (a missing
// Origin, another site, a sandboxed frame) is refused: fail closed. The
// refusal says what to do when a script is the likely sender (no Origin
// and no Sec-Fetch-Site, as curl sends) or the Origin names another
// origin (a script's guess, or a proxy that changes Host): send this
// inbox's origin, or use the REST API with an approver token.
func (s *Server) checkOrigin(r *http.Request) string {
	const msg = "This request did not come from the inbox's own pages; nothing was changed."
	site := r.Header.Get("Sec-Fetch-Site")
	if site != "" && site != "same-origin" {
		return msg
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	own := scheme + "://" + r.Host
	origin := r.Header.Get("Origin")
	switch {
	case origin == "null" && site == "same-origin":
		return ""
	case origin == "" && site == "":
		return "This request has no Origin header (a browser sends one; a script such as curl does not); nothing was changed. " +
			"The inbox takes its forms only from its own pages: a script that signs in or reviews here sends the inbox's origin in an Origin header (" +
			s.origin(own) + "), with the form's csrf field and its cookie; simpler, it uses the REST API on this listener " +
			"with an approver token (Authorization: Bearer <token>; POST /v1/approvals/{id}/approve or /deny: docs/operations.md, \"Approvals over REST\")."
	case origin == "" || origin == "null":
		return msg
	}
	if strings.EqualFold(origin, own) || (s.public != "" && strings.EqualFold(origin, s.public)) {
		return ""
	}
	return "This request's Origin header names another origin than this inbox's (" + s.origin(own) + "); nothing was changed. " +
		"A script sends the inbox's origin, or uses the REST API with an approver token (docs/operations.md, \"Approvals over REST\"); " +
		"behind a proxy that changes Host, set approvals.public_url to the address browsers use."
}

// origin names the origins this inbox accepts in an Origin header, own
// being the request's (scheme://Host): the public URL's first when one
// is set.
func (s *Server) origin(own string) string {
	if s.public != "" && !strings.EqualFold(s.public, own) {
		return s.public + " or " + visible(own)
	}
	return visible(own)
}

// originOf returns the origin (scheme://host[:port]) of an absolute URL and
// whether it is https.
func originOf(raw string) (string, bool, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false, errors.New("want an absolute http or https URL")
	}
	return u.Scheme + "://" + u.Host, u.Scheme == "https", nil
}

// signInView is the sign-in form.
type signInView struct {
	Next string
}

// safeNext returns next when it is a path of this inbox, else "/ui/".
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "/ui/signin") || strings.ContainsAny(next, "\\\r\n") || strings.Contains(next, "//") {
		return "/ui/"
	}
	return next
}

// signInForm shows the sign-in form (or goes to the inbox when signed in)
// and sets the form's CSRF cookie.
func (s *Server) signInForm(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if c, err := s.current(r); err == nil && c != nil {
		http.Redirect(w, r, next, http.StatusSeeOther) //nolint:gosec // G710: next passed safeNext (a path under /ui/ of this host)
		return
	}
	s.showSignIn(w, r, next, http.StatusOK, "")
}

// showSignIn renders the form with a fresh CSRF secret.
func (s *Server) showSignIn(w http.ResponseWriter, r *http.Request, next string, status int, errMsg string) {
	secret := randomToken()
	http.SetCookie(w, s.cookie(r, signInCookie, secret, 3600))
	s.render(w, r, "signin", status, view{Title: "Sign in", CSRF: secret, Error: errMsg, SignIn: &signInView{Next: next}})
}

// signIn checks the pasted token once and starts a session: a random
// cookie value whose SHA-256 names the stored session. The token itself is
// not kept (only its hash, to authenticate later requests against the
// configuration).
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	if msg := s.checkOrigin(r); msg != "" {
		s.errorPage(w, r, nil, http.StatusForbidden, msg)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, r, nil, http.StatusBadRequest, "The form could not be read.")
		return
	}
	next := safeNext(r.PostFormValue("next"))
	ck, err := r.Cookie(signInCookie)
	if err != nil || !sameSecret(r.PostFormValue("csrf"), ck.Value) {
		s.showSignIn(w, r, next, http.StatusForbidden, "The sign-in form expired or did not come from this page. Try again.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" || len(token) > maxToken {
		s.showSignIn(w, r, next, http.StatusUnauthorized, "Paste your approver token.")
		return
	}
	tokenHash := hashHex(token)
	p, roles, ok := s.identify(tokenHash)
	c := api.Caller{Principal: p, Roles: roles}
	switch {
	case !ok:
		s.log.WarnContext(r.Context(), "inbox sign-in with an unknown token")
		s.showSignIn(w, r, next, http.StatusUnauthorized, "This token is not an approver token of this gateway. Paste an approver's token (approvers in the config, or the approver token serve --dev printed: each start prints new ones), not an agent's.")
		return
	case !c.CanRead():
		s.showSignIn(w, r, next, http.StatusForbidden, "This token's roles cannot read approvals (it needs viewer, approver or admin).")
		return
	}
	value := randomToken()
	now := s.now()
	ws := store.WebSession{ID: hashHex(value), TokenHash: tokenHash, Principal: p.ID, CreatedAt: now, ExpiresAt: now.Add(s.ttl)}
	if err := s.sessions.CreateWebSession(r.Context(), ws); err != nil {
		s.log.ErrorContext(r.Context(), "store inbox session", "err", err)
		s.showSignIn(w, r, next, http.StatusServiceUnavailable, "The approval store is unavailable; try again.")
		return
	}
	if n, err := s.sessions.DeleteExpiredWebSessions(r.Context(), now); err != nil {
		s.log.WarnContext(r.Context(), "remove expired inbox sessions", "err", err)
	} else if n > 0 {
		s.log.DebugContext(r.Context(), "removed expired inbox sessions", "count", n)
	}
	s.log.InfoContext(r.Context(), "inbox sign-in", "principal", p.ID)
	http.SetCookie(w, s.cookie(r, sessionCookie, value, int(s.ttl.Seconds())))
	http.SetCookie(w, s.cookie(r, signInCookie, "", -1))
	http.Redirect(w, r, next, http.StatusSeeOther) //nolint:gosec // G710: next passed safeNext (a path under /ui/ of this host)
}

// signOut ends the session in the store (on every instance) and clears the
// cookie.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request, c *session) {
	if err := s.sessions.DeleteWebSession(r.Context(), c.id); err != nil {
		s.log.ErrorContext(r.Context(), "end inbox session", "err", err)
		s.errorPage(w, r, c, http.StatusServiceUnavailable, "The approval store is unavailable; you are still signed in.")
		return
	}
	s.log.InfoContext(r.Context(), "inbox sign-out", "principal", c.caller.Principal.ID)
	http.SetCookie(w, s.cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
}
