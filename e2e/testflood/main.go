// Command testflood opens many idle TCP connections to one address and
// holds them, as an attacker without a token would, for toolgate's
// end-to-end tests of the listeners' connection caps (issue 9 item 14).
//
//	testflood -addr 127.0.0.1:7071 -n 10000
//
// Every other connection first sends one keep-alive HTTP request
// (GET /healthz) and then stays idle; the others send nothing. With
// -one-byte every connection sends one byte of a request line ("G") and
// then nothing (a stalled request). -kind silent, idle or one-byte makes
// every connection of that one kind (memory measurements;
// docs/performance.md, "conn39"). A
// connection the server closes is not opened again. Once every
// connection has been tried, testflood prints one line
// "ready opened=N failed=M" on stdout, and then waits until its stdin is
// closed (or it gets SIGTERM), closes everything and prints
// "closed open=K", K being the connections the server had not closed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "", "host:port to connect to")
	n := flag.Int("n", 1000, "connections to open")
	parallel := flag.Int("parallel", 256, "connections being opened at once")
	oneByte := flag.Bool("one-byte", false, "every connection sends one byte of a request line and then nothing")
	kind := flag.String("kind", "", "every connection: silent, idle (one keep-alive request) or one-byte; default half silent, half idle")
	flag.Parse()
	if *oneByte {
		*kind = "one-byte"
	}
	if *addr == "" || *n < 1 || *parallel < 1 || !slices.Contains([]string{"", "silent", "idle", "one-byte"}, *kind) {
		fmt.Fprintln(os.Stderr, "usage: testflood -addr host:port -n N")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		// The test closes stdin to end the flood.
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()

	var (
		opened, failed, open atomic.Int64
		mu                   sync.Mutex
		conns                []net.Conn
		wg                   sync.WaitGroup
	)
	sem := make(chan struct{}, *parallel)
	d := net.Dialer{Timeout: 10 * time.Second}
	for i := range *n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.DialContext(ctx, "tcp", *addr)
			<-sem
			if err != nil {
				failed.Add(1)
				return
			}
			opened.Add(1)
			open.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			switch {
			case *kind == "one-byte":
				_, _ = io.WriteString(c, "G")
			case *kind == "idle" || *kind == "" && i%2 == 0:
				_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: flood\r\n\r\n")
			}
			// Read (the answer, if any) until the server closes it.
			_, _ = io.Copy(io.Discard, c)
			open.Add(-1)
		}()
	}
	// Every dial has been started; wait for the last ones to finish.
	for range *parallel {
		sem <- struct{}{}
	}
	fmt.Printf("ready opened=%d failed=%d\n", opened.Load(), failed.Load())
	<-ctx.Done()
	fmt.Printf("closed open=%d\n", open.Load())
	mu.Lock()
	for _, c := range conns {
		_ = c.Close()
	}
	mu.Unlock()
	wg.Wait()
}
