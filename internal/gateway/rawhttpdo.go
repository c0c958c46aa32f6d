package gateway

import (
	"io"
	"net/http"
	"net/url"
)

// doLean sends req, a raw POST over the h1Transport under hc
// (rawHTTPHead.lean), through hc's round tripper itself instead of
// hc.Do (branch hotpath8). http.Client.Do copies the request's headers
// for a redirect it might follow and keeps a list of the requests sent
// (makeHeadersCopier: a header map per call) before anything is
// written; a raw call's POST is answered by its endpoint, so that work
// is for nothing on every call.
//
// What Client.Do would do differently is kept: an error is a *url.Error
// as Client.Do returns it (Op and URL; the lean endpoint has no
// password to strip), and an answer that Client.Do would follow (a
// redirect status with a Location) is closed and the request sent
// again through hc.Do, which follows it under the client's
// CheckRedirect (newUpstreamHTTPClient). That repeats the POST to the
// endpoint that redirected it, which did not process it (RFC 9110,
// 15.4: a redirect says where the request should go instead).
func doLean(hc *http.Client, req *http.Request) (*http.Response, error) {
	resp, err := hc.Transport.RoundTrip(req) //nolint:gosec // G704: servers.<name>.url, the operator's configuration
	if err != nil {
		return nil, &url.Error{Op: "Post", URL: req.URL.String(), Err: err}
	}
	if !followed(resp) {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	body, err := req.GetBody()
	if err != nil {
		return nil, &url.Error{Op: "Post", URL: req.URL.String(), Err: err}
	}
	again := *req // the headers and URL are shared, as a request of newRawHTTPRequest shares them
	again.Body = body
	return hc.Do(&again) //nolint:gosec // G704: servers.<name>.url, the operator's configuration
}

// followed reports whether http.Client would follow resp, an answer to a
// POST with a body it can send again (net/http's redirectBehavior).
func followed(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return resp.Header.Get("Location") != ""
	}
	return false
}
