package audit_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/audit"
	"toolgate/internal/gate"
)

// TestTrailLosesNoWakeUpUnderConcurrentCalls (breakheld): calls decided
// from many goroutines while Run takes the queue are all chained within
// one Linger of the last of them, round after round, without a Flush and
// without the Poll (an hour): no call waits on a wake-up that the armed
// flag swallowed, and a lone call after the burst still wakes Run
// (with armed never cleared on take it would wait for the Poll). Batch 3 makes the batch-full signal race the linger's.
func TestTrailLosesNoWakeUpUnderConcurrentCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := openSQLite(t, filepath.Join(t.TempDir(), "tg.db"))
		tr := audit.New(db, &audit.Options{Linger: 100 * time.Millisecond, Batch: 3, Poll: time.Hour})
		g := gate.New(db, testPolicy(), &gate.Options{Recorder: tr})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- tr.Run(ctx) }()
		want := 0
		for round := range 6 {
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					for i := range round + 1 {
						if adm := g.Admit(ctx, call(fmt.Sprintf("read_%d_%d_%d", round, w, i))); !adm.Allowed {
							t.Errorf("refused: %s", adm.Message)
						}
					}
				})
			}
			wg.Wait()
			want += 8 * (round + 1)
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if n := len(records(t, db, "")); n != want {
				t.Fatalf("round %d: %d calls chained one linger after the last, want %d", round, n, want)
			}
			// One call alone after the appends: it must wake Run itself.
			g.Admit(ctx, call(fmt.Sprintf("read_alone_%d", round)))
			want++
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if n := len(records(t, db, "")); n != want {
				t.Fatalf("round %d: %d calls chained one linger after a lone call, want %d", round, n, want)
			}
		}
		// Shutdown flushes what is queued, linger or not.
		for i := range 5 {
			g.Admit(ctx, call(fmt.Sprintf("read_last_%d", i)))
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := len(records(t, db, "")); n != want+5 {
			t.Fatalf("%d calls chained after shutdown, want %d", n, want+5)
		}
	})
}
