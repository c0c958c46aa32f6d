package gateway

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"

	"toolgate/internal/approval"
)

// Who may call the HTTP front: the agent's bearer token (or, with
// InsecureNoAuth, anyone on a loopback listener), the principal it
// authenticates handed to the SDK path, and the browser origins allowed.

// httpPrincipalKey carries the authenticated principal from httpFront to
// the SDK's bearer-token verifier.
type httpPrincipalKey struct{}

func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// addrLoopback is byString(a.String()) without the string when a is a
// *net.TCPAddr without a zone (a listener's local address): for those the
// two rules here, isLoopbackAddr and sdkLoopback, read a.IP.IsLoopback
// (a nil or malformed IP is no loopback address by either). Formatting
// the address was two allocations on every call (docs/performance.md,
// "http47").
func addrLoopback(a net.Addr, byString func(string) bool) bool {
	if ta, ok := a.(*net.TCPAddr); ok && ta != nil && ta.Zone == "" {
		return ta.IP.IsLoopback()
	}
	return a != nil && byString(a.String())
}

// withPrincipal is r with p in its context, where the SDK path's
// requireToken reads it.
func withPrincipal(r *http.Request, p approval.Principal) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), httpPrincipalKey{}, p))
}

func (f *httpFront) authenticate(w http.ResponseWriter, r *http.Request) (approval.Principal, bool) {
	if f.opts.InsecureNoAuth {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && !addrLoopback(la, isLoopbackAddr) {
			http.Error(w, "unauthenticated access is only served on loopback", http.StatusForbidden)
			return approval.Principal{}, false
		}
		return approval.Principal{ID: "anonymous", Kind: "agent"}, true
	}
	// Parsed exactly as auth.RequireBearerToken parses it (its
	// strings.Fields, without the slice: bearerToken).
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
		http.Error(w, "missing bearer token: send the header \"Authorization: Bearer <agent token>\" (agents[] in the config, or the agent token serve --dev printed)", http.StatusUnauthorized)
		return approval.Principal{}, false
	}
	p, ok := f.authn(token)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate", error="invalid_token"`)
		// Says which token belongs here: the one most often sent by mistake
		// is the approver's (serve --dev prints both, alike).
		http.Error(w, "invalid bearer token: /mcp takes an agent's token (agents[] in the config, a session's token, or the agent token the running serve --dev printed: each start prints new ones), not an approver's", http.StatusUnauthorized)
		return approval.Principal{}, false
	}
	return p, true
}

// bearerToken is the token of an Authorization value that, split as
// strings.Fields splits it, is exactly two fields, the first "bearer" in
// any case; ok false otherwise. It allocates nothing (strings.Fields made
// a slice per request).
func bearerToken(v string) (token string, ok bool) {
	n := 0
	for f := range strings.FieldsSeq(v) {
		switch n {
		case 0:
			if !strings.EqualFold(f, "bearer") {
				return "", false
			}
		case 1:
			token = f
		default:
			return "", false
		}
		n++
	}
	return token, n == 2
}

// allowedOrigin reports whether a browser Origin may call the gateway: a
// loopback origin, or one naming the host the request was sent to.
func allowedOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	oh := u.Hostname()
	if oh == "localhost" {
		return true
	}
	if ip := net.ParseIP(oh); ip != nil && ip.IsLoopback() {
		return true
	}
	rh := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		rh = h
	}
	return strings.EqualFold(oh, rh)
}
