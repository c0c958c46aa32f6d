// Command perffloor is a yardstick for the HTTP-upstream row of issue 13:
// the least a proxy with two HTTP hops can do, to run in e2e/perfpair in
// place of a toolgate binary. It takes perfpair's command line (`serve
// --config FILE ...`), reads from FILE only the agent listener
// (`listen: {mcp: "HOST:PORT"...}`) and the upstream (`url: "..."`), and
// forwards every request, with no gate, audit or MCP logic:
//
//   - as `perffloor-tcp` (the executable's name ends in "-tcp"): byte for
//     byte, one upstream TCP connection per agent connection and a
//     goroutine per direction (io.Copy): the floor of any two-hop proxy on
//     the machine, HTTP parsing included in neither hop;
//
//   - otherwise: net/http's httputil.ReverseProxy (a request parsed and
//     written again, the answer's head likewise, an event stream flushed as
//     it comes): the floor of a proxy built on net/http.
//
//     go build -o /tmp/perffloor-tcp ./e2e/perffloor
//     go build -o /tmp/perffloor-http ./e2e/perffloor
//     go run ./e2e/perfpair -perf-bin /tmp/hp7perf/bin -upstream http \
//     -bin toolgate=/tmp/toolgate -bin tcp=/tmp/perffloor-tcp -bin rproxy=/tmp/perffloor-http
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

var (
	listenRe = regexp.MustCompile(`mcp:\s*"([^"]+)"`)
	urlRe    = regexp.MustCompile(`url:\s*"([^"]+)"`)
)

func main() {
	listen, upstream, err := config(os.Args[1:])
	if err != nil {
		fatalf("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fatalf("%v", err)
	}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	// The mode comes from the executable's name; say which one runs, so a
	// build under the wrong name is seen in the server's log, not in the
	// numbers.
	if strings.HasSuffix(filepath.Base(os.Args[0]), "-tcp") {
		fmt.Fprintf(os.Stderr, "perffloor: TCP byte relay on %s to %s (the executable's name ends in -tcp)\n", listen, upstream.Host)
		err = relayTCP(ln, upstream.Host)
	} else {
		fmt.Fprintf(os.Stderr, "perffloor: httputil.ReverseProxy on %s to %s (build as …-tcp for the byte relay)\n", listen, upstream)
		err = reverseProxy(ln, upstream)
	}
	if err != nil && ctx.Err() == nil {
		fatalf("%v", err)
	}
}

// config returns the agent listener and the upstream URL from the
// configuration file named by --config in args.
func config(args []string) (string, *url.URL, error) {
	var path string
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			path = args[i+1]
		}
	}
	if path == "" {
		return "", nil, errors.New("usage: perffloor serve --config FILE (perfpair's toolgate configuration)")
	}
	b, err := os.ReadFile(path) //nolint:gosec // G304: the harness's own file
	if err != nil {
		return "", nil, err
	}
	l, u := listenRe.FindSubmatch(b), urlRe.FindSubmatch(b)
	if l == nil || u == nil {
		return "", nil, fmt.Errorf("%s: no listen.mcp or servers.*.url (perffloor needs an HTTP upstream: perfpair -upstream http)", path)
	}
	up, err := url.Parse(string(u[1]))
	if err != nil {
		return "", nil, err
	}
	return string(l[1]), up, nil
}

// relayTCP copies bytes between each accepted connection and a new
// connection to addr until either side ends.
func relayTCP(ln net.Listener, addr string) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer func() { _ = c.Close() }()
			u, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer func() { _ = u.Close() }()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(u, c)
				_ = u.(*net.TCPConn).CloseWrite()
				close(done)
			}()
			_, _ = io.Copy(c, u)
			_ = c.(*net.TCPConn).CloseWrite()
			<-done
		}()
	}
}

// reverseProxy serves ln with httputil.ReverseProxy to up.
func reverseProxy(ln net.Listener, up *url.URL) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	// The agents' path (/mcp) is the upstream's: only the origin changes.
	origin := &url.URL{Scheme: up.Scheme, Host: up.Host}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(origin) },
		Transport: tr,
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "perffloor: "+format+"\n", args...)
	os.Exit(2)
}
