//go:build linux

package httpserve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
)

// TestCapSparesUnreadRequest: at the cap, a connection whose request has
// come but was not read yet (an overloaded process gets to it late) is
// not evicted as an idle one, whether its request is still in its socket
// or being read: the new connection is refused with 503 instead, a clear
// answer, where the evicted agent got EOF or a reset for a call it had
// sent (issue 13, held calls in a burst).
func TestCapSparesUnreadRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		// come makes the request of a, accepted as s, come.
		come func(t *testing.T, a, s net.Conn)
	}{
		{"in its socket", func(t *testing.T, a, s net.Conn) {
			t.Helper()
			send(t, a, "/")
			waitUnread(t, s)
		}},
		{"being read", func(t *testing.T, a, s net.Conn) {
			t.Helper()
			const start = "GET / HTTP/1.1\r\n" // headers not ended yet
			if _, err := io.WriteString(a, start); err != nil {
				t.Fatal(err)
			}
			// Read, as net/http reads the headers: the socket is empty again.
			if _, err := io.ReadFull(s, make([]byte, len(start))); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			shed := &shedLog{}
			l := Limit(inner, 1, &LimitOptions{OnShed: shed.add})
			defer l.Close()
			a := dial(t, inner.Addr().String())
			s, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			l.ConnState(s, http.StateNew)
			tc.come(t, a, s)

			b := dial(t, inner.Addr().String())
			accepted := make(chan net.Conn, 1)
			go func() {
				if c, err := l.Accept(); err == nil {
					accepted <- c
				}
			}()
			answered := make(chan int, 1) // the new connection's status
			go func() {
				resp, err := http.ReadResponse(bufio.NewReader(b), nil)
				if err != nil {
					return
				}
				_ = resp.Body.Close()
				answered <- resp.StatusCode
			}()
			select {
			case c := <-accepted:
				_ = c.Close()
				t.Fatalf("the new connection was accepted at the cap: the one with a request was evicted (shed %v)", shed.get())
			case status := <-answered:
				if status != http.StatusServiceUnavailable {
					t.Fatalf("the new connection got %d, want 503", status)
				}
			}
			if got := shed.get(); len(got) != 1 || got[0] != "refused" {
				t.Errorf("shed = %v, want [refused]", got)
			}
			if l.Open() != 1 {
				t.Errorf("Open = %d, want 1", l.Open())
			}
		})
	}
}

// waitUnread waits until s's socket holds bytes to read (without reading
// them).
func waitUnread(t *testing.T, s net.Conn) {
	t.Helper()
	rc, err := s.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if err := rc.Read(func(fd uintptr) bool {
		n, _, _ := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return n > 0
	}); err != nil {
		t.Fatal(err)
	}
}
