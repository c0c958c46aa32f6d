package procs

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestFollow: one P after Calm quiet looks, the default back at the first
// look that saw two calls in flight (even ones that ended before it) or
// the process busy, and nothing more when Follow ends on the default.
func TestFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu  sync.Mutex
			got []int
		)
		set := func(n int) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, n)
		}
		sets := func() []int {
			mu.Lock()
			defer mu.Unlock()
			return append([]int(nil), got...)
		}
		l := &Load{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		var cpu atomic.Int64 // the process's CPU time, ns
		go func() {
			Follow(ctx, l, 2, set, func() time.Duration { return time.Duration(cpu.Load()) })
			close(done)
		}()

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
		// One call in flight, but the process used most of a CPU since
		// the last look (work the front does not count).
		cpu.Add(int64(Every * 9 / 10))
		time.Sleep(Every)
		synctest.Wait()
		if s := sets(); len(s) != 4 || s[3] != 2 {
			t.Fatalf("after a busy look: set %v, want [1 2 1 2]", s)
		}
		cancel()
		<-done
		if s := sets(); len(s) != 4 {
			t.Fatalf("after Follow: set %v, want [1 2 1 2] (the default was in effect)", s)
		}
	})
}

// TestFollowDefaultOne: with one P as the default Follow changes nothing.
func TestFollowDefaultOne(t *testing.T) {
	Follow(t.Context(), &Load{}, 1, func(int) { t.Fatal("set called") }, nil)
}

// TestSeen: Seen counts each Begin and Saw, not End; Saw leaves the calls
// in flight alone; a nil Load sees nothing.
func TestSeen(t *testing.T) {
	l := &Load{}
	l.Begin()
	l.End()
	l.Saw()
	l.Begin()
	if got := l.Seen(); got != 3 {
		t.Fatalf("Seen = %d, want 3", got)
	}
	if now, most := l.InFlight(); now != 1 || most != 1 {
		t.Fatalf("InFlight = %d, %d, want 1, 1", now, most)
	}
	var none *Load
	none.Saw()
	if none.Seen() != 0 {
		t.Fatal("a nil Load saw something")
	}
}
