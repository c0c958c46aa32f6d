package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// bearerToken answers as the strings.Fields parse auth.RequireBearerToken
// makes, and allocates nothing (the Fields slice was one allocation per
// request).
func TestBearerTokenAsFieldsWithoutAllocating(t *testing.T) {
	for _, v := range []string{
		"", " ", "Bearer", "Bearer ", "Bearer tok", "bearer tok", "BEARER tok", "  Bearer\t tok \n",
		"Bearer tok extra", "Basic tok", "Bearertok", "Bearer\u00a0tok", "Bearer\u2003tok\u2003", "tok",
		"Bearer  a  b", "\vBearer\ftok\r",
	} {
		fields := strings.Fields(v)
		wantOK := len(fields) == 2 && strings.EqualFold(fields[0], "bearer")
		var want string
		if wantOK {
			want = fields[1]
		}
		got, ok := bearerToken(v)
		if got != want || ok != wantOK {
			t.Errorf("bearerToken(%q) = %q, %v; strings.Fields gives %q, %v", v, got, ok, want, wantOK)
		}
	}
	h := "Bearer " + aliceToken
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := bearerToken(h); !ok {
			t.Fatal("not a bearer token")
		}
	}); n != 0 {
		t.Fatalf("bearerToken allocated %v times, want 0", n)
	}
}

// An agent's POST is authenticated without an allocation of the front's
// own (testAuth allocates nothing for a known token).
func TestAuthenticateAllocatesNothing(t *testing.T) {
	f := &httpFront{authn: testAuth}
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+aliceToken)
	w := httptest.NewRecorder()
	if n := testing.AllocsPerRun(100, func() {
		if p, ok := f.authenticate(w, r); !ok || p.ID != "alice" {
			t.Fatal("not authenticated")
		}
	}); n != 0 {
		t.Fatalf("authenticate allocated %v times per request, want 0", n)
	}
}
