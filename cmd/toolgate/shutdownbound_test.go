package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestShutdownOverrunUndoesBeforeExit: once the shutdown overran its
// bound, what beforeExit registered (serve --stdio's giving its stdout
// pipe back blocking) runs before the exit, in the order registered; a
// shutdown that finished in time (stop) runs neither. On 2551504 the
// bound exited at once (ends40; e2e's TestStdioPipeBlockingAfterShutdownBound
// reached this with an agent that stopped reading, which since tail40 no
// longer overruns the bound: e2e's TestStdioShutdownWithAgentNotReading).
func TestShutdownOverrunUndoesBeforeExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		w := &shutdownWatch{}
		w.beforeExit(func() { got = append(got, "undo 1") })
		w.beforeExit(func() { got = append(got, "undo 2") })
		signalled, signal := context.WithCancel(t.Context())
		stop := w.arm(signalled, time.Second, slog.New(slog.DiscardHandler), func(code int) { got = append(got, fmt.Sprint("exit ", code)) })
		defer stop()
		signal()
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		if want := []string{"undo 1", "undo 2", "exit 1"}; !slices.Equal(got, want) {
			t.Errorf("after the bound: %q, want %q", got, want)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		var got []string
		w := &shutdownWatch{}
		w.beforeExit(func() { got = append(got, "undo") })
		signalled, signal := context.WithCancel(t.Context())
		stop := w.arm(signalled, time.Second, slog.New(slog.DiscardHandler), func(code int) { got = append(got, fmt.Sprint("exit ", code)) })
		signal()
		stop() // serve returned in time
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if len(got) != 0 {
			t.Errorf("a shutdown within its bound ran %q", got)
		}
	})
}
