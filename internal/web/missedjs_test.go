package web

import (
	"strings"
	"testing"

	"toolgate/internal/api"
)

// TestInboxScriptListensForEventsMissed: the inbox's EventSource listens
// for the events_missed notice a resumed stream sends when retention pruned
// events it had not read (api.EventsMissed), and refreshes on it. A named
// SSE event without a listener is dropped by the browser, so without one a
// page that reconnects after a long gap stays stale (review17).
func TestInboxScriptListensForEventsMissed(t *testing.T) {
	b, err := assets.ReadFile("assets/static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	if !strings.Contains(js, `const missedEvent = "`+api.EventsMissed+`"`) ||
		!strings.Contains(js, "es.addEventListener(missedEvent, onEvent)") {
		t.Fatalf("app.js registers no listener for the %q notice", api.EventsMissed)
	}
}
