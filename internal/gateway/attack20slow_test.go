package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// TestParkedAnswerToASlowReader (attack20): the answer to a parked held
// call reaches a client that reads it slowly but steadily, however long
// the whole takes, as on net/http's connection (no write timeout): the
// parked write timeout (parkedWriteTimeout) is for a client that stopped
// reading, none of the answer taken for that long. Before, it bounded the
// writing of the whole answer: 4 MiB to a client reading 64 KiB a second
// (a result of some MiB over a slow link) was cut after 30 s, the call
// approved and run and its result lost. Both parked answers: a 2025-era
// call's stream (parkedStream) and a 2026-07-28 call's response
// (parkedResponse). A client that reads nothing still fails the write.
func TestParkedAnswerToASlowReader(t *testing.T) {
	const size = 4 << 20
	body := bytes.Repeat([]byte("x"), size)
	writers := []struct {
		name  string
		write func(c net.Conn) error
	}{
		{"stream", func(c net.Conn) error {
			s := &parkedStream{conn: c, kept: keepHeader(http.Header{"Content-Type": {"application/json"}}), timeout: parkedWriteTimeout}
			if _, err := s.Write(body); err != nil {
				return err
			}
			return s.finish()
		}},
		{"response", func(c net.Conn) error {
			p := &parkedResponse{h: http.Header{"Content-Type": {"application/json"}}}
			_, _ = p.Write(body)
			return p.writeTo(parkedWriter{conn: c, timeout: parkedWriteTimeout}, true, false)
		}},
	}
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				server, client := net.Pipe()
				defer func() { _ = client.Close() }()
				werr := make(chan error, 1)
				go func() {
					werr <- w.write(server)
					_ = server.Close()
				}()
				// 64 KiB a second: the whole takes a minute.
				r := bufio.NewReaderSize(&slowReader{r: client, every: time.Second, n: 64 << 10}, 64<<10)
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				got, err := io.ReadAll(resp.Body)
				if err != nil || len(got) != size {
					t.Errorf("read %d bytes of the answer (want %d): %v; the write: %v", len(got), size, err, <-werr)
					return
				}
				if err := <-werr; err != nil {
					t.Errorf("writing the answer: %v", err)
				}
			})
		})
		t.Run(w.name+"/stopped", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				server, client := net.Pipe()
				defer func() { _ = client.Close() }()
				werr := make(chan error, 1)
				go func() { werr <- w.write(server) }()
				// Reads a little, then nothing.
				if _, err := io.ReadFull(client, make([]byte, 1024)); err != nil {
					t.Fatal(err)
				}
				if err := <-werr; err == nil {
					t.Error("the answer was written to a client that stopped reading")
				}
			})
		})
	}
}

// A slowReader reads at most n bytes at a time, waiting every between
// reads.
type slowReader struct {
	r     io.Reader
	every time.Duration
	n     int
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.every)
	return s.r.Read(p[:min(len(p), s.n)])
}
