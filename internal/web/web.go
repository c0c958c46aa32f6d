package web

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Backend is what the inbox needs of the admin API; *api.Server
// implements it. Every method applies the API's own role, tenant and review
// rules to the caller, so the inbox has no decision path of its own.
type Backend interface {
	ListApprovals(ctx context.Context, c api.Caller, f store.Filter) (api.List, error)
	// EachApproval is ListApprovals handing fn each approval as the store
	// reads it (*a is valid during the call only), so that a page keeps
	// what it shows of each (a row) rather than every approval whole.
	EachApproval(ctx context.Context, c api.Caller, f store.Filter, fn func(a *api.Approval) error) (next string, err error)
	GetApproval(ctx context.Context, c api.Caller, id approval.ID) (api.Approval, error)
	Review(ctx context.Context, c api.Caller, id approval.ID, v approval.Verdict, reason, pinnedHash string) (api.Approval, error)
	RequesterSessions(ctx context.Context, c api.Caller, a api.Approval) ([]api.SessionLink, error)
	ServeEventStream(w http.ResponseWriter, r *http.Request, c api.Caller) error
	// EventsEnd is the end of the change feed, a cursor string
	// (store.Cursor): a page rendered after reading it asks its stream for
	// the events after it, so none is missed between the page and the
	// stream.
	EventsEnd(ctx context.Context) (string, error)
	// PolicyRevision is the revision of the deployment policy in force
	// ("" when unknown), compared with a pending approval's
	// PolicyRevision: the detail page says when the policy changed since.
	PolicyRevision() string
	// ApproveWithGrant, ListGrants and RevokeGrant are the remembered
	// grants (issue 12), with the rules of /v1/grants and of an approve
	// carrying a "grant" object.
	ApproveWithGrant(ctx context.Context, c api.Caller, id approval.ID, reason, pinnedHash string, g api.GrantBody) (api.Approval, error)
	ListGrants(ctx context.Context, c api.Caller, f store.GrantFilter) (api.GrantList, error)
	RevokeGrant(ctx context.Context, c api.Caller, id, reason string) (api.Grant, error)
}

// Sessions stores signed-in browser sessions; store.WebSessionStore
// (the SQL store) implements it.
type Sessions interface {
	CreateWebSession(ctx context.Context, s store.WebSession) error
	GetWebSession(ctx context.Context, id string, now time.Time) (store.WebSession, error)
	DeleteWebSession(ctx context.Context, id string) error
	DeleteExpiredWebSessions(ctx context.Context, now time.Time) (int, error)
}

// Identify maps the lowercase hex SHA-256 of an approver's bearer token to
// the approver and its roles; ok is false for a token the configuration
// does not (or no longer) know. It must be safe for concurrent use.
type Identify func(tokenHash string) (p approval.Principal, roles []string, ok bool)

// Options configures a Server. A nil *Options gives the defaults.
type Options struct {
	// Logger receives request errors; default discard. Tokens, cookies and
	// arguments are never logged.
	Logger *slog.Logger
	// Now is the clock of sessions and countdowns; default time.Now.
	Now func() time.Time
	// SessionTTL is how long a sign-in lasts; default 12h.
	SessionTTL time.Duration
	// PublicURL is the inbox's external base URL (approvals.public_url):
	// its origin is accepted in the Origin header of POSTs besides the
	// request's own, and when it is https the session cookie is Secure
	// (it always is over TLS).
	PublicURL string
}

// Server is the approver web inbox, served under /ui/. It implements
// http.Handler and is safe for concurrent use.
type Server struct {
	backend  Backend
	sessions Sessions
	identify Identify
	log      *slog.Logger
	now      func() time.Time
	ttl      time.Duration
	public   string // origin of PublicURL, or ""
	secure   bool   // PublicURL is https
	// pages parses the pages on its first call (parsePages), once.
	pages  func() (map[string]*template.Template, error)
	static fs.FS
	mux    *http.ServeMux
}

//go:embed assets
var assets embed.FS

// Security headers of every answer (see the package doc).
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// New returns the inbox over backend (the admin API), storing sessions in
// sessions and identifying approvers with identify. Nil identify accepts
// no token (fail closed).
func New(backend Backend, sessions Sessions, identify Identify, opts *Options) (*Server, error) {
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
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if identify == nil {
		identify = func(string) (approval.Principal, []string, bool) { return approval.Principal{}, nil, false }
	}
	s := &Server{backend: backend, sessions: sessions, identify: identify, log: o.Logger, now: o.Now, ttl: o.SessionTTL,
		mux: http.NewServeMux()}
	if o.PublicURL != "" {
		origin, secure, err := originOf(o.PublicURL)
		if err != nil {
			return nil, fmt.Errorf("public URL: %w", err)
		}
		s.public, s.secure = origin, secure
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	s.static = static
	// Parsed on the first page served, not here: the parsed templates
	// are about 450 KB of live heap (and 600 KB allocated) that a gateway
	// whose inbox nobody opens keeps for nothing (docs/performance.md,
	// "Idle memory after calls: the heap"). They are embedded, so parsing
	// cannot fail in a built binary (TestPagesParse).
	s.pages = sync.OnceValues(parsePages)
	s.routes()
	return s, nil
}

// pageNames are the templates in assets/pages, each rendered inside
// assets/layout.html.
var pageNames = []string{"inbox", "detail", "history", "signin", "bulk", "error", "matches", "grants"}

// parsePages parses the layout with each page.
func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/parts.html")
	if err != nil {
		return nil, fmt.Errorf("parse layout: %w", err)
	}
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if _, err := t.ParseFS(assets, "assets/pages/"+name+".html"); err != nil {
			return nil, fmt.Errorf("parse page %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// funcs are the template functions.
var funcs = template.FuncMap{
	"segments":    segments,
	"rowSegments": rowSegments,
	"isBlock":     func(n node) bool { return n.Kind == "string" && strings.Contains(n.Str, "\n") },
	"last":        func(i, n int) bool { return i == n-1 },
	"plural":      plural,
}

// routes mounts every route under /ui/.
func (s *Server) routes() {
	s.mux.HandleFunc("GET /ui/{$}", s.page(s.inbox))
	s.mux.HandleFunc("GET /ui/fragment/inbox", s.fragment(s.inboxFragment))
	s.mux.HandleFunc("GET /ui/approvals/{id}", s.page(s.detail))
	s.mux.HandleFunc("GET /ui/fragment/approvals/{id}", s.fragment(s.detailFragment))
	s.mux.HandleFunc("POST /ui/approvals/{id}/approve", s.post(s.approve))
	s.mux.HandleFunc("POST /ui/approvals/{id}/deny", s.post(s.deny))
	s.mux.HandleFunc("POST /ui/approve", s.post(s.bulkApprove))
	s.mux.HandleFunc("GET /ui/history", s.page(s.history))
	s.mux.HandleFunc("GET /ui/grants", s.page(s.grants))
	s.mux.HandleFunc("POST /ui/grants/{id}/revoke", s.post(s.revokeGrant))
	s.mux.HandleFunc("GET /ui/events", s.events)
	s.mux.HandleFunc("GET /ui/signin", s.signInForm)
	s.mux.HandleFunc("POST /ui/signin", s.signIn)
	s.mux.HandleFunc("POST /ui/signout", s.post(s.signOut))
	s.mux.HandleFunc("GET /ui/static/{file}", s.asset)
	s.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		s.errorPage(w, r, nil, http.StatusNotFound, "There is no such page.")
	})
}

// ServeHTTP serves r with the security headers every answer carries.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	s.mux.ServeHTTP(w, r)
}

// asset serves an embedded file of assets/static.
func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := fs.ReadFile(s.static, name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	types := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
	ct, ok := types[path.Ext(name)]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write(b) //nolint:gosec // G705: an embedded asset of this package, with its own fixed type

}

// view is what every page template gets.
type view struct {
	Title     string
	Page      string
	User      *user // nil when signed out
	CSRF      string
	ServerNow string
	Since     string // the change feed's end (a cursor) before the page's data was read
	Flash     string
	Error     string
	Status    int

	Inbox   *inboxView
	Detail  *detailView
	History *historyView
	Bulk    *bulkView
	SignIn  *signInView
	Matches *matchesView
	Grants  *grantsView
}

// user is the signed-in approver as the header shows it.
type user struct {
	ID        string
	Roles     string
	CanReview bool
}

// render writes page with v and status.
func (s *Server) render(w http.ResponseWriter, r *http.Request, page string, status int, v view) {
	v.Page = page
	v.Status = status
	v.ServerNow = stamp(s.now())
	s.write(w, r, page, "layout", status, v)
}

// write executes template name of page (parsing the pages on first use)
// into a buffer first, so a template error is a clean 500 rather than half
// a page.
func (s *Server) write(w http.ResponseWriter, r *http.Request, page, name string, status int, data any) {
	pages, err := s.pages()
	if err != nil {
		s.log.ErrorContext(r.Context(), "parse inbox pages", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := pages[page].ExecuteTemplate(&buf, name, data); err != nil {
		s.log.ErrorContext(r.Context(), "render inbox page", "template", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage renders an error page with status and a public message; err
// (the cause) is only logged.
func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, c *session, status int, msg string) {
	v := view{Title: http.StatusText(status), Error: msg}
	if c != nil {
		v.User, v.CSRF = c.user(), c.csrf
	}
	s.render(w, r, "error", status, v)
}

// fail answers an error from the backend as its API status and message.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, c *session, err error) {
	status, detail := api.PublicError(err)
	level := slog.LevelDebug
	if status >= 500 {
		level = slog.LevelError
	}
	s.log.Log(r.Context(), level, "inbox request failed", "path", r.URL.Path, "status", status, "code", detail.Code, "err", err)
	s.errorPage(w, r, c, status, detail.Message)
}
