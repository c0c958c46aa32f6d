package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestChunkedBodyTooLargeWithoutSession (attack30): a POST without a
// session whose body, sent without a Content-Length (chunked), runs past
// MaxBody is answered 413, as the same body with its length and as any
// body on a session are. It was 400 ("cannot read the request body: http:
// request body too large").
func TestChunkedBodyTooLargeWithoutSession(t *testing.T) {
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
	url := serveHTTP(t, g, &HTTPOptions{MaxBody: 1024}) + "/mcp"
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 2048) + `"}}`
	// A reader of unknown length: the client sends the body chunked.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, io.MultiReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if req.ContentLength != 0 || resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "request body exceeds 1024 bytes") {
		t.Errorf("chunked (length %d) body of %d bytes: %d %q; want 413 naming the limit", req.ContentLength, len(body), resp.StatusCode, b)
	}
}
