package gateway

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func TestStdinGuard(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`garbage`,
		`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		``,
		`{"foo":1}`,
		`"just a string"`,
		strings.Repeat("x", 100),
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	g := newStdinGuard(strings.NewReader(in), &lockedWriter{w: nopCloser{&out}}, 64)
	passed, err := io.ReadAll(g)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	if string(passed) != want {
		t.Errorf("passed on:\n%s\nwant:\n%s", passed, want)
	}
	errs := strings.Split(strings.TrimSpace(out.String()), "\n")
	wantCodes := []string{"-32700", "-32600", "-32600", "-32600", "-32600"}
	if len(errs) != len(wantCodes) {
		t.Fatalf("error lines:\n%s\nwant %d", out.String(), len(wantCodes))
	}
	for i, code := range wantCodes {
		if !strings.Contains(errs[i], `"code":`+code) || !strings.Contains(errs[i], `"id":null`) {
			t.Errorf("error line %d = %s, want code %s and id null", i, errs[i], code)
		}
	}
	if !strings.Contains(errs[4], "too large") {
		t.Errorf("the long line's error = %s, want it to say too large", errs[4])
	}
}

func TestAllowedOrigin(t *testing.T) {
	for _, tt := range []struct {
		origin, host string
		want         bool
	}{
		{"http://localhost:3000", "127.0.0.1:7070", true},
		{"http://127.0.0.1:9", "127.0.0.1:7070", true},
		{"http://[::1]:9", "127.0.0.1:7070", true},
		{"https://gw.example.com", "gw.example.com", true},
		{"https://GW.example.com", "gw.example.com:443", true},
		{"http://evil.example", "127.0.0.1:7070", false},
		{"http://127.0.0.1.evil.example", "127.0.0.1:7070", false},
		{"null", "127.0.0.1:7070", false},
	} {
		if got := allowedOrigin(tt.origin, tt.host); got != tt.want {
			t.Errorf("allowedOrigin(%q, %q) = %v, want %v", tt.origin, tt.host, got, tt.want)
		}
	}
}
