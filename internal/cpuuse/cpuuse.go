// Package cpuuse measures how much CPU time a process used between two
// looks, from readings of its CPU time so far that may fail. A failed
// reading leaves what was used unknown: at the look that made it, and at
// the next one, which has nothing to measure from. Both of the process's
// watchers that read its CPU time (procs.Follow, execpages.WhenQuiet)
// treat an unknown look as a busy one (branch sched47: a failure read as
// zero CPU kept the process on one P at any load; branch fixes48: it made
// a busy process look quiet to WhenQuiet).
package cpuuse

import "time"

// A Meter measures the CPU time used between its looks. It is not safe
// for concurrent use: one watcher owns it.
type Meter struct {
	read func() (time.Duration, error)
	last time.Duration // the last reading, when ok
	ok   bool          // the last reading succeeded
}

// NewMeter returns a Meter whose first look measures from a reading taken
// now. read returns the process's CPU time so far (user and system:
// getrusage), or an error when it cannot be read; it must not be nil.
func NewMeter(read func() (time.Duration, error)) *Meter {
	m := &Meter{read: read}
	m.last, m.ok = m.reading()
	return m
}

// Since takes a reading and returns the CPU time used since the last one
// (the last look, or NewMeter), and true; or false, with zero, when this
// reading or the last one failed. The next look measures from this one.
func (m *Meter) Since() (time.Duration, bool) {
	now, ok := m.reading()
	used, known := now-m.last, ok && m.ok
	m.last, m.ok = now, ok
	if !known {
		return 0, false
	}
	return used, true
}

func (m *Meter) reading() (time.Duration, bool) {
	d, err := m.read()
	return d, err == nil
}
