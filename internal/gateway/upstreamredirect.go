package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
)

// maxUpstreamRedirects is how many redirects one request to an HTTP
// upstream may follow (Go's http.Client default).
const maxUpstreamRedirects = 10

// newUpstreamHTTPClient returns the http.Client of an HTTP upstream's
// sessions, whose transport rt adds servers.<name>.headers (the upstream's
// credentials) to every request it sends. A redirect is followed only
// within the origin (scheme, host and port) of the request that got it
// and only when it keeps the method (307, 308): a redirect to another
// origin would have rt hand that origin the credentials and the call's
// arguments (Go's client drops only its own Authorization and Cookie
// headers across hosts, not those a transport adds), and a 301, 302 or
// 303 would turn a tools/call POST into a GET of the event stream. Such a
// redirect fails the request before anything is sent to its target, and
// is logged to log as a warning (the agent is told only that nothing was
// run).
func newUpstreamHTTPClient(rt http.RoundTripper, log *slog.Logger) *http.Client {
	return &http.Client{Transport: rt, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		err := checkUpstreamRedirect(req, via)
		if err != nil {
			log.WarnContext(req.Context(), "refused an HTTP upstream's redirect; the request fails", "err", err)
		}
		return err
	}}
}

// checkUpstreamRedirect is the http.Client.CheckRedirect of
// newUpstreamHTTPClient: req is the redirected request, via those sent so
// far, oldest first.
func checkUpstreamRedirect(req *http.Request, via []*http.Request) error {
	prev := via[len(via)-1]
	switch {
	case len(via) >= maxUpstreamRedirects:
		return fmt.Errorf("the upstream redirected %d times; toolgate stops there", len(via))
	case req.URL.Scheme != via[0].URL.Scheme || req.URL.Host != via[0].URL.Host:
		return fmt.Errorf("refused the upstream's redirect to another origin (%s://%s): toolgate sends an upstream's calls and headers only to the origin of servers.<name>.url", req.URL.Scheme, req.URL.Host)
	case req.Method != prev.Method:
		return errors.New("refused the upstream's redirect that turns a " + prev.Method + " into a " + req.Method + " (only 307 and 308 are followed): set servers.<name>.url to the final URL")
	}
	return nil
}
