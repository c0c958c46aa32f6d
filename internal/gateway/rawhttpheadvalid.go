package gateway

import "net/http"

// h1HeaderSendable reports whether net/http's Transport would send a
// request with header h: every name a token (RFC 9110 §5.1), every value
// free of control characters other than a tab (RFC 9110 §5.5; obs-text
// allowed), as httpguts.ValidHeaderFieldName and ValidHeaderFieldValue
// check them in Transport.roundTrip before it dials. Request.Write does
// not check: it drops a name that is not a token and turns CR and LF in a
// value into spaces, while the Transport refuses the request. A request
// this refuses does not go lean (h1Transport.lean), so that the lean
// exchange refuses it as the Transport does instead of writing a NUL, a
// DEL, a line break or a name with one (header injection) to the
// upstream (branch attack15). Configured headers with such names or
// values are refused when the configuration loads (config.Validate);
// this is the lean exchange's own guard.
func h1HeaderSendable(h http.Header) bool {
	for k, vv := range h {
		if k == "" {
			return false
		}
		for i := 0; i < len(k); i++ {
			if !h1TokenByte[k[i]] {
				return false
			}
		}
		for _, v := range vv {
			for i := 0; i < len(v); i++ {
				if h1BadValueByte[v[i]] {
					return false
				}
			}
		}
	}
	return true
}

// h1TokenByte marks the bytes of an HTTP token: !#$%&'*+-.^_`|~, digits
// and ASCII letters.
var h1TokenByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range []byte("!#$%&'*+-.^_`|~") {
		t[c] = true
	}
	return t
}()

// h1BadValueByte marks the bytes a header value must not hold: control
// characters other than a tab, and DEL.
var h1BadValueByte = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = c != '\t'
	}
	t[0x7f] = true
	return t
}()

// h1ValidHost reports whether host, the endpoint's URL.Host, is a Host
// header Request.Write writes as it is (httpguts.ValidHostHeader): for
// another (url.Parse takes `"`, `<` and `>` in a host; Request.Write then
// writes an empty Host) the endpoint does not go lean (newH1Transport).
func h1ValidHost(host string) bool {
	for i := 0; i < len(host); i++ {
		if !h1HostByte[host[i]] {
			return false
		}
	}
	return true
}

// h1HostByte marks the bytes of a valid Host header (httpguts'
// validHostByte).
var h1HostByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = h1TokenByte[c] && c != '#' && c != '^' && c != '`' && c != '|'
	}
	for _, c := range []byte("(),:;=[]") {
		t[c] = true
	}
	return t
}()
