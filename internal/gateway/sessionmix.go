package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
)

// answerForAnotherSession returns, for resp, the 2xx answer to the
// tools/call POST req with id, the JSON answer the SDK gets in its place
// when resp names another Mcp-Session-Id than the one req was sent in: the
// go-sdk v1.8.0 client takes that for a failed write ("mismatching session
// IDs"), and its connection then refuses every later call of the session
// (attack17). Only that call fails, as one that may have run (the upstream
// had it). It returns nil when resp goes to the SDK as it is. A session id
// in the answer of a request sent without one is left to the SDK (it
// adopts it).
func answerForAnotherSession(ctx context.Context, req *http.Request, resp *http.Response, id json.RawMessage, s *slot, log *slog.Logger) *http.Response {
	sent, got := req.Header.Get("Mcp-Session-Id"), resp.Header.Get("Mcp-Session-Id")
	if sent == "" || got == "" || got == sent || resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return nil
	}
	_ = resp.Body.Close()
	why := "an answer for another session"
	if log != nil {
		log.WarnContext(ctx, "upstream answer broken; its call fails and may have run", "why", why)
	}
	v := brokenAnswerError(why)
	s.markVerdict(v)
	return jsonAnswer(resp, verdictResponse(id, v))
}
