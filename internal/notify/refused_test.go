package notify

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// captured is a slog handler that keeps the records' levels and messages.
type captured struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *captured) Enabled(context.Context, slog.Level) bool { return true }
func (c *captured) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r.Clone())
	return nil
}
func (c *captured) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *captured) WithGroup(string) slog.Handler      { return c }

// count returns how many records with message msg were logged at each
// level.
func (c *captured) count(msg string) map[slog.Level]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[slog.Level]int{}
	for _, r := range c.recs {
		if r.Message == msg {
			n[r.Level]++
		}
	}
	return n
}

// TestRefusalWarnsOncePerInterval (branch tasks47): a receiver that
// refuses the sender (401/403: Refused) is retried as before, but the
// refusal is logged at WARN on the first attempt and then once per
// RefusedWarnEvery per channel; other failed attempts stay INFO.
func TestRefusalWarnsOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &captured{}
		refusing := &recorder{answer: func(Message) (string, error) { return "", Refused(errors.New("receiver answered 401")) }}
		down := &recorder{answer: func(Message) (string, error) { return "", errors.New("receiver answered 500") }}
		h := start(t, []Route{
			{Name: "refusing", Channel: refusing, Events: []string{Requested}, MaxAge: time.Hour},
			{Name: "down", Channel: down, Events: []string{Requested}, MaxAge: time.Hour},
		}, Options{Poll: time.Hour, Backoff: time.Minute, BackoffMax: time.Minute, Logger: slog.New(logs)})
		h.request(t, "writes", "fs")
		time.Sleep(25*time.Minute + time.Second)
		synctest.Wait()
		attempts := len(refusing.got())
		if attempts < 20 {
			t.Fatalf("%d attempts of the refusing channel in 25 minutes, want one a minute", attempts)
		}
		const warned = "notification refused by its receiver (check the channel's secret or token); will retry"
		const retried = "notification attempt failed; will retry"
		// Warned at 0, 10 and 20 minutes; every other attempt INFO (the
		// 500s of the other channel included).
		if got := logs.count(warned); got[slog.LevelWarn] != 3 || len(got) != 1 {
			t.Errorf("refusal warnings %v, want 3 at WARN in 25 minutes", got)
		}
		if got := logs.count(retried); got[slog.LevelInfo] != attempts-3+len(down.got()) || len(got) != 1 {
			t.Errorf("retries logged %v, want %d at INFO only", got, attempts-3+len(down.got()))
		}
	})
}
