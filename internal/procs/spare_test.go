package procs

import (
	"runtime"
	"slices"
	"testing"
)

// TestSpareLendsTheDefaultWhileBlocking: with one P set, a Blocking
// section sets the default from its start to the end of the last one
// open; without one P it changes nothing; Set during a section waits for
// its end only when it asks for one P.
func TestSpareLendsTheDefaultWhileBlocking(t *testing.T) {
	var got []int
	s := NewSpare(4, func(n int) { got = append(got, n) })
	step := func(what string, f func(), want ...int) {
		t.Helper()
		got = nil
		f()
		if !slices.Equal(got, want) {
			t.Errorf("%s: set %v, want %v", what, got, want)
		}
	}
	var d1, d2 func()
	step("blocking before Follow set one P", func() { d1 = s.Blocking() })
	step("its end", func() { d1() })
	step("Follow sets one P", func() { s.Set(1) }, 1)
	step("a section starts", func() { d1 = s.Blocking() }, 4)
	step("a second one starts", func() { d2 = s.Blocking() })
	step("the first ends", func() { d1() })
	step("the first ends again (once only)", func() { d1() })
	step("the last ends", func() { d2() }, 1)
	step("a section starts", func() { d1 = s.Blocking() }, 4)
	step("Follow asks for one P during it", func() { s.Set(1) })
	step("the section ends", func() { d1() }, 1)
	step("a section starts", func() { d1 = s.Blocking() }, 4)
	step("Follow sets the default during it", func() { s.Set(4) }, 4)
	step("the section ends: the default stays", func() { d1() })
	var none *Spare
	step("a nil Spare", func() { none.Blocking()() })
}

// TestSpareSetsTheRuntimesPs: with the runtime's own setter (serve's),
// the process has its default Ps inside a section and one after it.
func TestSpareSetsTheRuntimesPs(t *testing.T) {
	def := runtime.GOMAXPROCS(0)
	if def < 2 {
		t.Skip("one CPU: the default is one P")
	}
	t.Cleanup(func() { runtime.GOMAXPROCS(def) })
	s := NewSpare(def, func(n int) { runtime.GOMAXPROCS(n) })
	s.Set(1)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("after Set(1): %d Ps, want 1", n)
	}
	done := s.Blocking()
	if n := runtime.GOMAXPROCS(0); n != def {
		t.Errorf("inside a Blocking section with one P set: %d Ps, want the default %d", n, def)
	}
	done()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("after the section: %d Ps, want 1", n)
	}
}
