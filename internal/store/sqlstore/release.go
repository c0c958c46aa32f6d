package sqlstore

import (
	"strings"

	"toolgate/internal/approval"
)

// Lease releases. A release (approval.Request.Release: a held call went
// away and its lease ends now, so an identical re-send may take the
// request over) changes no state and writes no event, so the change
// feed does not show it. An identical re-send waiting on that lease in
// another instance (gate.takeOver) would then wait until the lease
// would have ended (up to one lease, 15 s). The watch tells it instead:
// on Postgres the release sends a notification of its own; on SQLite
// every commit changes PRAGMA data_version, which the watch reports as
// touched (DB.WatchLogTouched).

// eventReleased is the type of a release's notification on Postgres
// ("<id> <state> released"). It is never written to the event log.
const eventReleased approval.EventType = "released"

// isRelease reports whether a change from before to after only ended
// its holder's lease early: the same holder and state, a lease that now
// ends sooner (approval.Request.Release). A renewal, a take-over and a
// decision are not releases.
func isRelease(before, after approval.Request) bool {
	return after.HeldBy != "" && after.HeldBy == before.HeldBy && after.State == before.State &&
		after.LeaseUntil.Before(before.LeaseUntil)
}

// releaseNotice is the notification to other instances of a release
// planned in p, sent once its transaction committed, or none when there is
// none or the dialect sends no notifications (SQLite: its watch sees every
// commit, DB.WatchLogTouched). The notification is
// "<id> <state> released" on Channel; the watch reports it as a change
// of the request (changed, not appended: the log did not grow), which
// wakes an identical re-send waiting on that lease in another instance
// at once instead of when the lease would have ended.
func releaseNotice(d dialect, p storePlan) []notice {
	if !p.released {
		return nil
	}
	return d.notices([]event{{Event: approval.Event{RequestID: p.out.ID, Type: eventReleased, State: p.out.State}}})
}

// parseRelease reports whether payload, a notification on Channel, is a
// release's (releaseNotice), and its request's id.
func parseRelease(payload string) (approval.ID, bool) {
	head, rest, ok := strings.Cut(payload, " ")
	if !ok {
		return "", false
	}
	_, typ, ok := strings.Cut(rest, " ")
	return approval.ID(head), ok && typ == string(eventReleased)
}
