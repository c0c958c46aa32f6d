package gateway

import (
	"io"
)

// newStdinGuard returns the reader that stands between a stdio agent (in)
// and the SDK: it passes on each line that is one JSON-RPC 2.0 message the
// SDK serves faithfully (checkMessage) and answers any other line itself,
// on out, with a JSON-RPC error, so one bad line cannot end the session.
// (The SDK ends a stdio session on a line it cannot decode, on an id that
// is not a string or number, on nesting deeper than 1000, and on a batch,
// which MCP 2025-06-18 and later no longer allow; it answers ids past 2^53
// or with a fraction under a different id.) A line longer than max bytes
// (limits.max_request_bytes) is read to its end without being kept and
// answered with an error under its id. Each line it reads calls seen (the
// gateway's Options.Load.Saw: what tells a quiet process from a busy one).
//
// lean, when not nil, is offered each line that passes, with its method
// (checkMethod): a line it takes (stdioLean.offer) is not passed on.
func newStdinGuard(in io.Reader, out *lockedWriter, max int, seen func(), lean *stdioLean) *lineFilter {
	return newLineFilter(in, max, func(l jsonLine) []byte {
		seen()
		if l.over {
			e := invalidMessage(l.scan.id, "the message (%d bytes) exceeds limits.max_request_bytes (%d bytes)", l.size, max)
			_, _ = out.Write(errorLine(e))
			return nil
		}
		line := trimSpace(l.data)
		if len(line) == 0 {
			return nil
		}
		method, e := checkMethod(line)
		if e != nil {
			_, _ = out.Write(errorLine(e))
			return nil
		}
		if lean != nil && lean.offer(line, method) {
			return nil
		}
		return append(line, '\n')
	})
}

// trimSpace trims JSON whitespace (and nothing else) from both ends of b.
func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
