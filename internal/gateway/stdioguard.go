package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// A stdinGuard stands between a stdio agent and the SDK: it passes on each
// line that is one JSON-RPC 2.0 message and answers any other line itself
// with a JSON-RPC error (id null), so one bad line cannot end the session.
// (The SDK ends a stdio session on a line it cannot decode, and on a batch,
// which MCP 2025-06-18 and later no longer allow.) Lines longer than max
// bytes are answered with an error too, and skipped whole.
type stdinGuard struct {
	r   *bufio.Reader
	out *lockedWriter
	max int

	buf []byte // a checked line waiting to be read
	err error  // the reader's error, returned once buf is drained
}

// lockedWriter serialises writes, so the guard's error lines never
// interleave with the SDK's messages (the SDK writes one message, newline
// included, per Write).
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

func newStdinGuard(in io.Reader, out *lockedWriter, max int) *stdinGuard {
	return &stdinGuard{r: bufio.NewReaderSize(in, 64<<10), out: out, max: max}
}

func (g *stdinGuard) Read(p []byte) (int, error) {
	for len(g.buf) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		line, err := g.readLine()
		g.err = err
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if code, msg := checkMessage(line); code != 0 {
			_, _ = g.out.Write(errorLine(code, msg))
			continue
		}
		g.buf = append(line, '\n')
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

// readLine reads one line; a line longer than g.max is drained and replaced
// by a line the check refuses.
func (g *stdinGuard) readLine() ([]byte, error) {
	var line []byte
	over := false
	for {
		chunk, err := g.r.ReadSlice('\n')
		if !over && len(line)+len(chunk) <= g.max {
			line = append(line, chunk...)
		} else {
			over, line = true, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if over {
			return tooLong, err
		}
		return line, err
	}
}

// tooLong marks a line over the size limit; checkMessage refuses it.
var tooLong = []byte{0}

// checkMessage returns 0 for a line that is one JSON-RPC 2.0 message, else
// the JSON-RPC error code and message to answer it with.
func checkMessage(line []byte) (int, string) {
	switch {
	case len(line) == 1 && line[0] == 0:
		return -32600, "message too large"
	case !json.Valid(line):
		return -32700, "parse error: the line is not valid JSON"
	case line[0] == '[':
		return -32600, "invalid request: JSON-RPC batches are not supported"
	case line[0] != '{':
		return -32600, "invalid request: not a JSON-RPC message object"
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  *string         `json:"method"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
		return -32600, `invalid request: not a JSON-RPC 2.0 message ("jsonrpc": "2.0" is required)`
	}
	if m.Method == nil && m.ID == nil {
		return -32600, "invalid request: neither a method nor an id"
	}
	return 0, ""
}

func errorLine(code int, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	return append(b, '\n')
}
