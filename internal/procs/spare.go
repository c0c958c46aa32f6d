package procs

import "sync"

// A Spare sets the number of Ps for Follow and lends the process its
// default number back while a goroutine blocks its thread in the kernel
// (a SQLite commit's writes and sync: [Spare.Blocking]).
//
// Why: a goroutine in a system call keeps its P until the call returns
// or sysmon takes the P back, and sysmon, asleep for up to 10 ms when the
// process is quiet, rarely does within a disk sync of a few ms. With one
// P (Follow at one call at a time) nothing runs meanwhile: the call in
// flight waits for the sync, though its answer is in (http29,
// docs/performance.md). With the default number, the P given back at
// once has a thread waiting on the network, which serves the call.
//
// Its methods are safe for concurrent use.
type Spare struct {
	def int       // the default number of Ps (Follow's def)
	set func(int) // sets the number (serve: runtime.GOMAXPROCS or its default)

	mu   sync.Mutex
	one  bool // Follow asked for one P
	lent int  // Blocking sections not yet done
}

// NewSpare returns a Spare that sets the number of Ps with set; def is
// the default number (what Follow is given).
func NewSpare(def int, set func(int)) *Spare {
	return &Spare{def: def, set: set}
}

// Set is Follow's setter: n is 1 (one P) or the default. While a Blocking
// section is open, one P is set only once the last one is done.
func (s *Spare) Set(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.one = n == 1
	if s.one && s.lent > 0 {
		return
	}
	s.set(n)
}

// Blocking marks the start of work that blocks its thread in the kernel
// for milliseconds; the returned function marks its end and must be
// called once. While one P is set, the default number is set from the
// start of the first open section to the end of the last (each change
// stops the world briefly: for work that blocks far longer than that).
// Otherwise it changes nothing. A nil *Spare does nothing.
func (s *Spare) Blocking() (done func()) {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	if s.lent == 0 && s.one {
		s.set(s.def)
	}
	s.lent++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.lent--
			if s.lent == 0 && s.one {
				s.set(1)
			}
		})
	}
}
