package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func readAll(t *testing.T, c *stdioConn) ([]jsonrpc.Message, error) {
	t.Helper()
	var msgs []jsonrpc.Message
	for {
		m, err := c.Read(t.Context())
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
	}
}

func TestStdioConnRead(t *testing.T) {
	const resp = `{"jsonrpc":"2.0","id":1,"result":{"n":12345678901234567890}}`
	const note = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	tests := []struct {
		name    string
		in      string
		max     int
		want    int    // messages read before the error
		wantErr string // "" means io.EOF
	}{
		{name: "lines", in: resp + "\n" + note + "\n", want: 2},
		{name: "crlf and blank lines", in: "\n" + resp + "\r\n\r\n  \n" + note + "\r\n", want: 2},
		{name: "last line without newline", in: resp + "\n" + note, want: 2},
		{name: "too long", in: resp + "\n" + note + "\n", max: len(resp), want: 1, wantErr: "exceeds the size limit"},
		{name: "exactly the limit", in: resp + "\n", max: len(resp), want: 1},
		{name: "not json", in: "starting server...\n" + resp + "\n", wantErr: "not one JSON value"},
		{name: "two values on a line", in: resp + " " + resp + "\n", wantErr: "not one JSON value"},
		{name: "batch", in: "[" + resp + "]\n", wantErr: "batches are not allowed"},
		{name: "not a message", in: `{"jsonrpc":"2.0"}` + "\n", wantErr: "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.max
			if max == 0 {
				max = 1 << 20
			}
			// One byte per Read, and a small buffer: lines span many fills.
			tr := stdioTransport{r: iotest.OneByteReader(strings.NewReader(tt.in)), w: nopWriteCloser{io.Discard}, max: max}
			mc, err := tr.Connect(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			c := mc.(*stdioConn)
			c.r = bufio.NewReaderSize(c.r, 16)
			msgs, err := readAll(t, c)
			if len(msgs) != tt.want {
				t.Errorf("read %d messages, want %d (err %v)", len(msgs), tt.want, err)
			}
			switch {
			case tt.wantErr == "" && !errors.Is(err, io.EOF):
				t.Errorf("err = %v, want EOF", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestStdioConnKeepsRawResult: the raw result of a decoded response stays
// intact after later reads (rawcap keeps it).
func TestStdioConnKeepsRawResult(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":1,"result":{"n":12345678901234567890}}` + "\n" + `{"jsonrpc":"2.0","id":2,"result":{"m":"` + strings.Repeat("x", 100) + `"}}` + "\n"
	c := &stdioConn{r: bufio.NewReaderSize(strings.NewReader(in), 16), w: nopWriteCloser{io.Discard}, max: 1 << 20}
	msgs, _ := readAll(t, c)
	if len(msgs) != 2 {
		t.Fatalf("%d messages", len(msgs))
	}
	if got := string(msgs[0].(*jsonrpc.Response).Result); got != `{"n":12345678901234567890}` {
		t.Errorf("first result %s", got)
	}
}

// TestStdioConnWrite: concurrent writes come out as whole lines, one
// message each.
func TestStdioConnWrite(t *testing.T) {
	pr, pw := io.Pipe()
	c := &stdioConn{w: pw, max: 1 << 20}
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id, _ := jsonrpc.MakeID(float64(i))
			req := &jsonrpc.Request{ID: id, Method: "tools/call", Params: []byte(`{"name":"` + strings.Repeat("a", 5000) + `"}`)}
			if err := c.Write(context.Background(), req); err != nil {
				t.Error(err)
			}
		})
	}
	go func() { wg.Wait(); _ = c.Close() }()
	rd := &stdioConn{r: bufio.NewReader(pr), w: nopWriteCloser{io.Discard}, max: 1 << 20}
	msgs, err := readAll(t, rd)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("read: %v", err)
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		seen[fmt.Sprint(m.(*jsonrpc.Request).ID.Raw())] = true
	}
	if len(msgs) != n || len(seen) != n {
		t.Errorf("%d messages, %d distinct ids; want %d", len(msgs), len(seen), n)
	}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Write(cancelled, &jsonrpc.Request{Method: "x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("write with a cancelled context: %v", err)
	}
}
