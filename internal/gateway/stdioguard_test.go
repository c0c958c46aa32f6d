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
