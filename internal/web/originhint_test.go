package web_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"toolgate/internal/web"
)

// TestOriginRefusalSaysWhatToDo (polish48): a sign-in POSTed by a script
// (curl: no Origin, no Sec-Fetch-Site) was refused with "This request did
// not come from the inbox's own pages", which tells its author nothing.
// Still refused (403, no session), it now names the inbox's origin to
// send and the REST API with an approver token; an Origin naming another
// origin names the accepted ones (the public URL's too) and public_url.
// A browser's cross-site POST keeps the short refusal.
func TestOriginRefusalSaysWhatToDo(t *testing.T) {
	e := newEnv(t, &web.Options{PublicURL: "https://approvals.example"})
	b := e.browser()
	signIn := func(origin string, header ...string) answer {
		t.Helper()
		form := b.do("GET", "/ui/signin", nil)
		b.origin = origin
		defer func() { b.origin = "http://inbox.test" }()
		a := b.do("POST", "/ui/signin", url.Values{"csrf": {csrf(t, form.body)}, "token": {bobTok}, "next": {"/ui/"}}, header...)
		if a.status != http.StatusForbidden {
			t.Fatalf("sign-in with Origin %q %v: %d, want 403", origin, header, a.status)
		}
		if _, ok := b.cookies["toolgate_session"]; ok || b.do("GET", "/ui/", nil).status != http.StatusSeeOther {
			t.Fatalf("a refused sign-in started a session")
		}
		return a
	}
	for _, c := range []struct {
		name   string
		origin string
		header []string
		want   []string
		not    []string
	}{
		{"curl", "", nil, []string{
			"This request has no Origin header (a browser sends one; a script such as curl does not); nothing was changed.",
			"sends the inbox's origin in an Origin header (https://approvals.example or http://inbox.test)",
			"with the form's csrf field and its cookie",
			"uses the REST API on this listener with an approver token (Authorization: Bearer <token>; POST /v1/approvals/{id}/approve or /deny: docs/operations.md",
		}, nil},
		{"another origin", "http://inbox.test:9999", nil, []string{
			"This request's Origin header names another origin than this inbox's (https://approvals.example or http://inbox.test); nothing was changed.",
			"uses the REST API with an approver token", "set approvals.public_url",
		}, []string{"inbox.test:9999"}},
		{"cross-site browser", "https://evil.test", []string{"Sec-Fetch-Site", "cross-site"},
			[]string{"This request did not come from the inbox's own pages; nothing was changed."}, []string{"REST API", "evil.test"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := html.UnescapeString(signIn(c.origin, c.header...).body)
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Errorf("the refusal does not say %q:\n%s", w, body)
				}
			}
			for _, w := range c.not {
				if strings.Contains(body, w) {
					t.Errorf("the refusal says %q", w)
				}
			}
		})
	}
	// The same page's POST still signs in.
	b.signIn(bobTok)
}
