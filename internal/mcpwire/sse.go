package mcpwire

import (
	"bytes"
	"io"
)

// WriteEvent writes one server-sent event of type "message" whose data is
// msg, one JSON-RPC message. A message that spans several lines (raw JSON
// an upstream sent pretty-printed) is written as several data lines, which
// a client joins back with line feeds: the same JSON.
func WriteEvent(w io.Writer, msg []byte) error {
	var buf bytes.Buffer
	buf.Grow(len(msg) + 24)
	buf.WriteString("event: message\n")
	for {
		line, rest, more := bytes.Cut(msg, []byte{'\n'})
		buf.WriteString("data: ")
		buf.Write(bytes.TrimSuffix(line, []byte{'\r'}))
		buf.WriteByte('\n')
		if !more {
			break
		}
		msg = rest
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}
