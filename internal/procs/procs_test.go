package procs

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestFollow: one P after Calm quiet looks, the default back at the first
// look that saw two calls in flight (even ones that ended before it), and
// the default again when Follow ends.
func TestFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu  sync.Mutex
			got []int
		)
		set := func(n int) int {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, n)
			return 0
		}
		sets := func() []int {
			mu.Lock()
			defer mu.Unlock()
			return append([]int(nil), got...)
		}
		l := &Load{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { Follow(ctx, l, 2, set); close(done) }()

		l.Begin() // one call at a time: calm
		time.Sleep(Every*(Calm-1) + Every/2)
		synctest.Wait()
		if s := sets(); len(s) != 0 {
			t.Fatalf("set %v before %d calm looks", s, Calm)
		}
		time.Sleep(Every)
		synctest.Wait()
		if s := sets(); len(s) != 1 || s[0] != 1 {
			t.Fatalf("after %d calm looks: set %v, want [1]", Calm, s)
		}
		l.Begin() // a second call in flight, over before the next look
		l.End()
		time.Sleep(Every)
		synctest.Wait()
		if s := sets(); len(s) != 2 || s[1] != 2 {
			t.Fatalf("after a look that saw two calls: set %v, want [1 2]", s)
		}
		l.End()
		time.Sleep(Every * Calm)
		synctest.Wait()
		if s := sets(); len(s) != 3 || s[2] != 1 {
			t.Fatalf("calm again: set %v, want [1 2 1]", s)
		}
		cancel()
		<-done
		if s := sets(); len(s) != 4 || s[3] != 2 {
			t.Fatalf("after Follow: set %v, want [1 2 1 2]", s)
		}
	})
}

// TestFollowDefaultOne: with one P as the default Follow changes nothing.
func TestFollowDefaultOne(t *testing.T) {
	Follow(t.Context(), &Load{}, 1, func(int) int { t.Fatal("set called"); return 0 })
}
