package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLeanParkCloseRacesArrivals (attack30): the gateway's Close while
// held calls are still arriving, so that some pass parkStarts and hijack
// their connection after Close began (held29 no longer holds closeMux
// through the hijack). Each client gets exactly one answer, an error
// (refused or ended by the shutdown), or its connection closed; none
// waits past testWait; no call ran or was consumed; no goroutine is left.
func TestLeanParkCloseRacesArrivals(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	base, parked := parkedFront(t, f, nil)
	const n = 60
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i], _ = dialRaw(t, base)
	}
	host := strings.TrimPrefix(base, "http://")
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range conns {
		wg.Go(func() {
			<-start
			_, _ = io.WriteString(c, rawModernRequest(host, fmt.Sprint(1+i), "up__big", fmt.Sprintf(`{"n":%d}`, 1+i)))
		})
	}
	close(start)
	waitParkedCount(t, parked, 3)
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	answered := 0
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				t.Errorf("call %d: no answer and the connection still open %v after Close", i, testWait)
			}
			continue // closed without an answer
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		answered++
		if resp.StatusCode == http.StatusOK && !bytes.Contains(b, []byte(`"isError":true`)) && !bytes.Contains(b, []byte(`"error"`)) {
			t.Errorf("call %d at Close: %d %s: want an error", i, resp.StatusCode, b)
		}
	}
	if k := f.consumedCount(t); k != 0 {
		t.Fatalf("%d requests consumed", k)
	}
	if k := f.h.count("big"); k != 0 {
		t.Fatalf("big ran %d times", k)
	}
	t.Logf("%d of %d parked, %d answered", parked.Load(), n, answered)
}
