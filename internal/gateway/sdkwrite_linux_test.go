package gateway

import (
	"context"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stallReader is a stdin that stops being read while stalled: a Read
// after stall waits until resume (a Read already waiting in r when stall
// came still takes what arrives).
type stallReader struct {
	r    io.Reader
	mu   sync.Mutex
	gate chan struct{} // nil: not stalled; closed by resume
}

func (s *stallReader) Read(p []byte) (int, error) {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g != nil {
		<-g
	}
	return s.r.Read(p)
}

func (s *stallReader) stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

func (s *stallReader) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

// runStallUpstream serves, on stdio, tool stall (after it the server stops
// reading its stdin until it gets SIGUSR1), tool echo (its arguments back)
// and prompt pad (its arguments' total length back).
func runStallUpstream() error {
	in := &stallReader{r: os.Stdin}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			in.resume()
		}
	}()
	s := mcp.NewServer(&mcp.Implementation{Name: "stall-upstream", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "stall", InputSchema: objectSchema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		in.stall()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stalled"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: objectSchema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "pad", Arguments: []*mcp.PromptArgument{{Name: "pad"}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		n := 0
		for _, v := range req.Params.Arguments {
			n += len(v)
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: strings.Repeat("x", n%7) + "ok"}}}}, nil
	})
	return s.Run(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{os.Stdout}})
}

// TestSDKWriteEndsAtItsBound (fixes29): requests the gateway sends a stdio
// child through the go-sdk's transport (prompts/get here; also 2026-07-28
// calls, resources, completion, notifications) were written with no
// bound: once the child stopped reading its stdin, a request whose line
// filled the pipe held its agent for as long as the child did not read,
// and every later request of the upstream (other agents' too) waited
// behind it. Now each ends at its bound (call_timeout) with an error that
// says so, the session is not closed for it, the child's stream stays
// framed (the rest of a partly written line follows when it reads
// again), and later requests work once the child reads again.
func TestSDKWriteEndsAtItsBound(t *testing.T) {
	verifyNoLeaks(t)
	const bound = time.Second
	cfg := ServerConfig{Name: "up", Command: os.Args[0], Args: []string{"-test.run=^$"},
		Env: map[string]string{envUpstream: "stdio-stall"}, CallTimeout: bound,
		// One child for both agents: they share its stdin and its lock.
		Sessions: SessionsShared}
	var logs logBuffer
	g := newGateway(t, []ServerConfig{cfg}, allowAll(), &Options{Logger: logs.logger()})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	base := serveHTTP(t, g, nil)
	alice := connectHTTP(t, base, aliceToken, nil, nil)
	bob := connectHTTP(t, base, bobToken, nil, nil)
	up := waitUpstream(t, g, "up", nil)
	if up.proc.dl == nil {
		t.Skip("the child's stdin is not a pollable pipe here: no write deadline")
	}

	if _, err := alice.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__stall", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("stall: %v", err)
	}
	type result struct {
		err  error
		took time.Duration
	}
	getPrompt := func(cs *mcp.ClientSession, pad int) <-chan result {
		ch := make(chan result, 1)
		go func() {
			start := time.Now()
			_, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "up__pad", Arguments: map[string]string{"pad": strings.Repeat("p", pad)}})
			ch <- result{err, time.Since(start)}
		}()
		return ch
	}
	// A hang guard, not a timing: each request's bound is 1 s; before
	// the bound they never returned while the child did not read.
	wait := func(what string, ch <-chan result) result {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still waiting on a child that does not read, 20 s after its %s call_timeout", what, bound)
			return result{}
		}
	}
	// 1 MiB: more than the pipe and whatever the child's reader took.
	big := wait("alice's large prompts/get", getPrompt(alice, 1<<20))
	if big.err == nil || !strings.Contains(big.err.Error(), "stopped reading its stdin") {
		t.Fatalf("alice's large prompts/get: %v, want the child's stopped reading, the rest to follow", big.err)
	}
	// The rest of alice's line holds the pipe: bob's request is not sent
	// at all, and waits no longer than its own bound.
	small := wait("bob's prompts/get", getPrompt(bob, 10))
	if c := waitUpstream(t, g, "up", nil); c != up {
		t.Errorf("after alice's request the upstream session was replaced")
	}
	if small.err == nil || !strings.Contains(small.err.Error(), "did not read its stdin") {
		t.Fatalf("bob's prompts/get: %v, want it not sent: the child did not read", small.err)
	}
	t.Logf("alice's request ended after %v, bob's after %v (bound %v): %v", big.took, small.took, bound, small.err)

	// The session was not closed for it: the same child reads again, takes
	// the rest of alice's line (its answer comes for a request the SDK
	// gave up: dropped), and answers what follows.
	if err := up.proc.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// The child first reads the rest of alice's 1 MiB line and answers
	// it: on a busy machine that can take longer than the bound, and a
	// call that meanwhile ends at call_timeout is asked again.
	var res *mcp.CallToolResult
	var err error
	for deadline := time.Now().Add(testWait); ; {
		res, err = bob.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"after": "resume"}})
		if err == nil || !strings.Contains(err.Error(), "no result within call_timeout") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("echo after the child read again: %v", err)
	}
	if got := textOf(t, res); got != `{"after":"resume"}` {
		t.Errorf("echo after the child read again = %s", got)
	}
	for _, cs := range []*mcp.ClientSession{alice, bob} {
		r := wait("prompts/get after the child read again", getPrompt(cs, 3))
		if r.err != nil {
			t.Fatalf("prompts/get after the child read again: %v", r.err)
		}
	}
	if c := waitUpstream(t, g, "up", nil); c != up {
		t.Errorf("the upstream session was replaced (the child restarted); want the same session")
	}
	if err := up.proc.exitError(0); err != nil {
		t.Errorf("the child ended: %v", err)
	}
}
