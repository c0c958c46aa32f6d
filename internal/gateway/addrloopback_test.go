package gateway

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAddrLoopbackAsString checks that addrLoopback, which skips
// formatting a zoneless *net.TCPAddr, answers as both rules answer the
// address's String: v4, v6, v4-mapped, unspecified, nil and malformed IPs,
// zones, a nil *net.TCPAddr and other address types.
func TestAddrLoopbackAsString(t *testing.T) {
	addrs := []net.Addr{
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070},
		&net.TCPAddr{IP: net.IP{127, 9, 8, 7}, Port: 1},
		&net.TCPAddr{IP: net.IPv6loopback, Port: 7070},
		&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 7070},
		&net.TCPAddr{IP: net.ParseIP("::ffff:10.0.0.1"), Port: 7070},
		&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 7070},
		&net.TCPAddr{IP: net.IPv4zero, Port: 7070},
		&net.TCPAddr{IP: net.IPv6unspecified, Port: 7070},
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 7070},
		&net.TCPAddr{Port: 7070},
		&net.TCPAddr{IP: net.IP{127, 0, 0}, Port: 7070},
		&net.TCPAddr{IP: net.IPv6loopback, Port: 7070, Zone: "lo"},
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 7070, Zone: "eth0"},
		(*net.TCPAddr)(nil),
		&net.UnixAddr{Name: "/tmp/x.sock", Net: "unix"},
		&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53},
	}
	rules := []struct {
		name string
		f    func(string) bool
	}{{"isLoopbackAddr", isLoopbackAddr}, {"sdkLoopback", sdkLoopback}}
	loop := 0
	for _, a := range addrs {
		for _, r := range rules {
			want := r.f(a.String())
			if got := addrLoopback(a, r.f); got != want {
				t.Errorf("addrLoopback(%#v, %s) = %v, %s(%q) = %v", a, r.name, got, r.name, a.String(), want)
			}
			if want {
				loop++
			}
		}
	}
	if loop < 8 {
		t.Errorf("%d loopback answers, want at least 8 (the table lost its loopback rows)", loop)
	}
	if got := testing.AllocsPerRun(100, func() { addrLoopback(addrs[0], isLoopbackAddr) }); got != 0 {
		t.Errorf("addrLoopback of a *net.TCPAddr allocates %v times, want 0", got)
	}
}

// TestInsecureNoAuthOnlyOnLoopback: without authentication, a request
// that came in on a local address off loopback (a *net.TCPAddr as
// net/http gives it: addrLoopback's quick path) is refused with 403, one
// on a loopback address (v4, v6) is served.
func TestInsecureNoAuthOnlyOnLoopback(t *testing.T) {
	g := newGateway(t, nil, allowAll(), nil)
	h, err := g.Handler(nil, &HTTPOptions{InsecureNoAuth: true, ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		local *net.TCPAddr
		want  int
	}{
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 7070}, http.StatusForbidden},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 7070}, http.StatusForbidden},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 7070, Zone: "lo"}, http.StatusForbidden}, // as isLoopbackAddr reads "[::1%lo]:7070"
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}, http.StatusOK},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 7070}, http.StatusOK},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7070/mcp", strings.NewReader(initializeBody))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(tt.local)))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("on %v: %d %s, want %d", tt.local, w.Code, w.Body.String(), tt.want)
		}
	}
}
