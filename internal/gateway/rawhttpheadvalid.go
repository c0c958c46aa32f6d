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
// upstream (branch attack15).
func h1HeaderSendable(h http.Header) bool {
	for k, vv := range h {
		if !h1Token(k) {
			return false
		}
		for _, v := range vv {
			for i := 0; i < len(v); i++ {
				if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
					return false
				}
			}
		}
	}
	return true
}

// h1Token reports whether s is an HTTP token: one or more of
// !#$%&'*+-.^_`|~, digits and ASCII letters.
func h1Token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
			c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~':
		default:
			return false
		}
	}
	return true
}
