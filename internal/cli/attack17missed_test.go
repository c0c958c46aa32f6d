package cli

import (
	"strings"
	"testing"

	"toolgate/internal/api"
)

// TestEventLineOfMissedEvents: watch prints an events_missed notice (a
// stream resumed past events retention pruned; attack17) as a line that
// says which events were missed, not as an event "by toolgate".
func TestEventLineOfMissedEvents(t *testing.T) {
	got := eventLine(api.Event{Cursor: "0.3", Type: api.EventsMissed, Actor: "toolgate", After: "0.1"})
	if !strings.Contains(got, "events after 0.1 through 0.3 were pruned") {
		t.Errorf("eventLine = %q, want it to say the events after 0.1 through 0.3 were pruned", got)
	}
}
