package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
)

// The JSON response body of an HTTP upstream's tools/call POST passes
// through jsonLimit before the SDK reads it: it captures the raw result
// (rawcap.go) and enforces limits.max_result_bytes on that one body. A body
// over the limit is cut off without being held, and the SDK gets in its
// place a small JSON-RPC error response to the call
// (resultTooLargeResponse), so only that call fails; left to the SDK, a
// JSON body is read whole, however large. Event streams get the same limit
// per event in sseTee (ssetee.go).

// jsonLimit serves a single JSON response body of at most max bytes, or
// the error response in its place.
type jsonLimit struct {
	body io.ReadCloser
	s    *slot
	id   json.RawMessage
	max  int
	size int64 // the body's Content-Length, or -1
	log  *slog.Logger

	r io.Reader // what Read serves; set on the first Read
}

func (t *jsonLimit) Read(p []byte) (int, error) {
	if t.r == nil {
		t.r = t.load()
	}
	return t.r.Read(p)
}

func (t *jsonLimit) Close() error { return t.body.Close() }

// load reads the body, up to one byte past max.
func (t *jsonLimit) load() io.Reader {
	if t.size > int64(t.max) {
		return t.tooLarge(t.size)
	}
	buf, err := io.ReadAll(io.LimitReader(t.body, int64(t.max)+1))
	if err != nil {
		// The SDK would end its session on the read error: only this
		// call fails (sdkbreak.go).
		return t.broken("the body ended early or could not be read")
	}
	if len(buf) > t.max {
		return t.tooLarge(t.size)
	}
	result, why := checkAnswer(buf, t.id)
	if why != "" {
		return t.broken(why)
	}
	if len(result) > 0 {
		t.s.set(result)
	}
	return bytes.NewReader(buf)
}

func (t *jsonLimit) tooLarge(n int64) io.Reader {
	t.log.WarnContext(context.Background(), "upstream result larger than limits.max_result_bytes discarded; its call fails",
		"bytes", n, "limit", t.max, "id", string(t.id))
	v := resultTooLargeError(n, t.max)
	t.s.markVerdict(v)
	return bytes.NewReader(verdictResponse(t.id, v))
}

// broken logs why the JSON answer is broken (never its bytes) and returns
// the error response the SDK gets in its place.
func (t *jsonLimit) broken(why string) io.Reader {
	t.log.WarnContext(context.Background(), "upstream answer broken; its call fails and may have run", "why", why, "id", string(t.id))
	v := brokenAnswerError(why)
	t.s.markVerdict(v)
	return bytes.NewReader(verdictResponse(t.id, v))
}
