package store

// Settled returns a generation of the store's commits and whether it is
// current (sqlstore.DB.Settled): the generation moves on every commit the
// store's watch sees, from any connection or process, and on every failed
// poll; ok is false while the watch cannot vouch for it (Postgres, no watch
// running, a poll not recent). A nil Settled vouches for nothing.
type Settled func() (gen uint64, ok bool)

// read calls s; ok is false when s is nil.
func (s Settled) read() (uint64, bool) {
	if s == nil {
		return 0, false
	}
	return s()
}

// SettledMark is the generation at a consumer's last look at the store
// that succeeded (the idle sweeper's pending count, the audit trail's
// append): while the store's generation is current and still the marked
// one, nothing was committed and no poll failed since, so the look would
// find the same. The zero value vouches for nothing. Not safe for
// concurrent use; its owner's goroutine keeps it.
type SettledMark struct {
	gen uint64
	ok  bool // the look succeeded and gen was current
}

// Unchanged reports whether s is current and at the marked generation.
func (m SettledMark) Unchanged(s Settled) bool {
	if !m.ok {
		return false
	}
	gen, ok := s.read()
	return ok && gen == m.gen
}

// Look runs look and marks the generation s had before it, when s was
// current and look succeeded (returned true); otherwise it clears the
// mark. It returns look's answer.
func (m *SettledMark) Look(s Settled, look func() bool) bool {
	gen, ok := s.read()
	done := look()
	*m = SettledMark{gen: gen, ok: ok && done}
	return done
}
