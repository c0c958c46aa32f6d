package gateway

import (
	"context"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// An orphanLister is a TaskKeeper that lists the approved tasks whose
// runner is gone (*gate.Gate.OrphanedTasks), a page at a time.
type orphanLister interface {
	OrphanedTasks(ctx context.Context, after approval.ID, limit int) (rs []approval.Request, next approval.ID, err error)
}

// orphanSweepLimit is the size of a page of the sweep's list, and caps
// the tasks one sweep takes up (not those it finds it cannot run); the
// rest wait for the next sweep.
const orphanSweepLimit = 100

// orphanSweepPages caps the pages one sweep reads: the tasks it cannot
// run here (and does not try again) are listed with the others, and a
// sweep reads past them to the tasks behind, up to this many pages; the
// next sweep goes on from where it stopped.
const orphanSweepPages = 10

// sweepOrphanedTasks runs, every interval until ctx ends, each approved
// task whose runner is gone (the instance that answered with it stopped or
// died: its lease lapsed) through the take-over a tasks/get does
// (resumeTask), so an approved task runs without waiting for its agent's
// next tasks/get (branch tasks47). Instances racing for one task run it
// once: the take-over of its lease and the consume are compare-and-sets.
// The result is kept in the ledger for the agent's later tasks/get.
// Each sweep reads pages of the list (only tasks the store says nobody
// holds: branch tasks48) from where the last one stopped, until the list
// ends, orphanSweepLimit tasks were taken up or orphanSweepPages pages
// were read; after the list's end the next sweep starts from its
// beginning.
func (g *Gateway) sweepOrphanedTasks(ctx context.Context, l orphanLister, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	s := newOrphanSweep()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := g.sweepOrphansOnce(ctx, l, s, orphanSweepLimit, orphanSweepPages); err != nil && ctx.Err() == nil {
			g.log.Warn("cannot look for approved tasks whose runner is gone; trying again", "err", err, "in", interval)
		}
	}
}

// orphanSweep is what one sweep of approved tasks whose runner is gone
// leaves to the next; it belongs to the sweep's goroutine.
type orphanSweep struct {
	// cannot holds the tasks this instance could not run (their call
	// unreadable here, their tool gone from the catalog): not tried, nor
	// logged, again while they stay listed; the agent's tasks/get still
	// tries.
	cannot map[approval.ID]bool
	// seen holds the tasks listed since the list's beginning was last
	// read: at its end, those of cannot no longer listed are dropped.
	seen map[approval.ID]bool
	// after is where the next read of the list starts ("" its beginning).
	after approval.ID
}

func newOrphanSweep() *orphanSweep {
	return &orphanSweep{cannot: map[approval.ID]bool{}, seen: map[approval.ID]bool{}}
}

// sweepOrphansOnce is one sweep: it reads pages of page tasks from
// s.after and takes each up (resumeTask) but those in s.cannot, until the
// list ends, page tasks were taken up (a task found unrunnable on this
// try joins s.cannot and does not count) or pages pages were read. An error
// is the list's: the next sweep reads that page again.
func (g *Gateway) sweepOrphansOnce(ctx context.Context, l orphanLister, s *orphanSweep, page, pages int) error {
	started := 0
	for range pages {
		rs, next, err := l.OrphanedTasks(ctx, s.after, page)
		if err != nil {
			return err
		}
		for _, r := range rs {
			s.seen[r.ID] = true
			if s.cannot[r.ID] {
				continue
			}
			// Only a task taken up counts against the round's
			// budget: one found unrunnable on this try is read past
			// like those found before (polish48); pages bounds the
			// reading.
			took, cannot := g.resumeTask(ctx, gate.TaskState{Request: r, Runnable: true}, gate.FoundBySweep)
			if cannot {
				s.cannot[r.ID] = true
			}
			if took {
				started++
			}
		}
		s.after = next
		if next == "" {
			for id := range s.cannot {
				if !s.seen[id] {
					delete(s.cannot, id)
				}
			}
			clear(s.seen)
			return nil
		}
		if started >= page {
			return nil
		}
	}
	return nil
}
