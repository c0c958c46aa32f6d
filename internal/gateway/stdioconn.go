package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport is the client side of MCP's stdio transport (MCP
// 2025-11-25, Transports: stdio: one JSON-RPC message per line, no
// embedded newlines) over a child's pipes. It replaces the SDK's
// IOTransport for upstreams because that one costs more per message on
// the hot path (docs/performance.md): it encodes each outgoing message
// while holding its write lock, so calls on a shared session queue
// behind each other's encoding, and it decodes each incoming line twice
// (first as a batch, which fails, then as a message; every decode
// allocates a 32 KiB buffer in the SDK). Here a message is encoded before
// the lock, and a line is decoded once.
type stdioTransport struct {
	r   io.Reader // the child's stdout
	w   io.WriteCloser
	max int // bytes; the longest line read
}

func (t stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	return &stdioConn{r: bufio.NewReaderSize(t.r, 64<<10), w: t.w, max: t.max}, nil
}

// A stdioConn reads and writes newline-delimited JSON-RPC messages.
// Reads come from one goroutine (the SDK's read loop); writes may be
// concurrent. Close closes the writer, which for an upstream ends the
// child; its stdout then closes and a Read waiting on it returns.
type stdioConn struct {
	r   *bufio.Reader
	max int

	mu sync.Mutex // serialises writes of whole lines
	w  io.WriteCloser

	closeOnce sync.Once
	closeErr  error
}

// errLineTooLong ends a session whose peer wrote a line longer than the
// limit (the SDK's IOTransport fails the same way).
var errLineTooLong = errors.New("stdio message exceeds the size limit")

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		line, err := c.readLine()
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				return nil, err
			}
			continue // a blank line
		}
		msg, derr := decodeLine(line)
		if derr != nil {
			return nil, derr
		}
		// A last line without a newline is still a message; the error
		// (io.EOF) comes with the next Read.
		return msg, nil
	}
}

// readLine returns the next line without its newline, as a new slice (the
// decoded message keeps parts of it). It fails with errLineTooLong past
// max bytes.
func (c *stdioConn) readLine() ([]byte, error) {
	var line []byte
	for {
		frag, err := c.r.ReadSlice('\n')
		if len(line)+len(frag) > c.max+1 { // +1: the newline
			return nil, fmt.Errorf("%w (%d bytes)", errLineTooLong, c.max)
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// decodeLine decodes one line: exactly one JSON object, a JSON-RPC message.
// Batches are an error: MCP 2025-06-18 and later (toolgate opens upstream
// sessions at 2025-11-25) do not allow them.
func decodeLine(line []byte) (jsonrpc.Message, error) {
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		return nil, errors.New("stdio: a line that is not one JSON value")
	}
	if line[0] != '{' {
		return nil, errors.New("stdio: a line that is not a JSON-RPC message object (batches are not allowed)")
	}
	return jsonrpc.DecodeMessage(line)
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	data = append(data, '\n')
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err = c.w.Write(data)
	return err
}

func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.w.Close() })
	return c.closeErr
}

func (c *stdioConn) SessionID() string { return "" }
