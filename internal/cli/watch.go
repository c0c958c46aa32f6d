package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/store"
)

// Reconnection backoff of watch: it doubles from watchRetryMin up to
// watchRetryMax, and starts again from the minimum after a connection that
// delivered something.
const (
	watchRetryMin = 500 * time.Millisecond
	watchRetryMax = 15 * time.Second
)

// maxEventLine bounds one line of the event stream (an event's JSON).
const maxEventLine = 8 << 20

// runWatch prints approval requests and decisions as they happen, from
// GET /v1/events/stream, until ctx ends (exit 0). A dropped connection is
// reopened with Last-Event-ID, so nothing is missed or printed twice; an
// answer that will not change by retrying (401, 403, 404, 422) ends it
// with that error. Notes go to stderr (status), events to out.
func runWatch(ctx context.Context, c *client, o *options, _ []string, out io.Writer) error {
	last := o.since
	if last == "0" {
		last = store.Cursor{}.String()
	}
	first := true
	// Without --since the first connection starts at the end of the log;
	// every later one after the last event seen (or where that first one
	// started).
	fromEnd := !o.sinceSet
	backoff := watchRetryMin
	for {
		got, err := c.watchOnce(ctx, last, fromEnd, first, o, out)
		if got.last != "" {
			last = got.last
		}
		if ctx.Err() != nil {
			return nil
		}
		var he *httpError
		if errors.As(err, &he) && he.Status/100 == 4 && he.Status != http.StatusTooManyRequests {
			return err
		}
		if got.connected {
			first, fromEnd = false, false
		}
		if got.events > 0 {
			backoff = watchRetryMin
		}
		msg := "the event stream ended"
		if err != nil {
			msg = "the event stream failed: " + err.Error()
		}
		_, _ = fmt.Fprintf(o.status, "toolgate: %s; reconnecting in %v\n", cleanLines(msg), backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(backoff*2, watchRetryMax)
	}
}

// watched is what one connection of watch did.
type watched struct {
	connected bool
	events    int
	last      string // the last event id (a change-feed cursor) seen, "" if none
}

// watchOnce opens the stream once (at the end of the log when fromEnd is
// set, else after the change-feed cursor last) and prints what it sends
// until it ends.
// first says whether to print the "watching" note or the "reconnected"
// one.
func (c *client) watchOnce(ctx context.Context, last string, fromEnd, first bool, o *options, out io.Writer) (watched, error) {
	var w watched
	path := "/v1/events/stream"
	if !fromEnd {
		path += "?since=" + url.QueryEscape(last)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return w, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	if !fromEnd && !first {
		// A reconnect; the first connection names --since in the query
		// alone, so a refusal of it names since, the flag's name.
		req.Header.Set("Last-Event-ID", last)
	}
	// No overall timeout: the stream stays open; the server sends a
	// comment line every 15 s.
	hc := &http.Client{Transport: c.http.Transport}
	resp, err := hc.Do(req)
	if err != nil {
		return w, c.requestError(http.MethodGet, path, err)
	}
	defer func() { _ = resp.Body.Close() }() // a read error was returned already
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
		return w, decodeError(resp.StatusCode, b)
	}
	w.connected = true
	if first {
		_, _ = fmt.Fprintf(o.status, "toolgate: watching approvals at %s (Ctrl-C to stop)\n", clean(c.base))
	} else {
		_, _ = fmt.Fprintf(o.status, "toolgate: reconnected; resuming after event %s\n", clean(last))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if id != "" {
				// The stream sends events in feed order: the latest id is
				// where to resume.
				w.last = id
			}
			if data != "" {
				if err := printEvent(out, data, o.json); err != nil {
					return w, err
				}
				w.events++
			}
			id, data = "", ""
		case strings.HasPrefix(line, ": stream after "):
			// Where the server started: resume from there after a drop,
			// even if no event came.
			if c, err := store.ParseCursor(strings.TrimPrefix(line, ": stream after ")); err == nil {
				w.last = c.String()
			}
		case strings.HasPrefix(line, ":"): // a comment: heartbeat
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return w, err
	}
	return w, nil
}

// printEvent prints one event: its JSON as sent (hidden characters
// escaped) with --json, else one line for people.
func printEvent(out io.Writer, data string, asJSON bool) error {
	if asJSON {
		_, err := fmt.Fprintf(out, "%s\n", api.EscapeJSON([]byte(data)))
		return err
	}
	var ev api.Event
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return fmt.Errorf("decode event: %w", err)
	}
	_, err := fmt.Fprintln(out, eventLine(ev))
	return err
}

// eventLine is the text line of one event: time, type, subject, details.
func eventLine(ev api.Event) string {
	at := "-"
	if !ev.At.IsZero() {
		at = ev.At.UTC().Format("15:04:05")
	}
	head := fmt.Sprintf("%s  %-11s", at, clean(ev.Type))
	a := ev.Approval
	switch {
	case ev.Type == api.EventsMissed:
		return head + "  events after " + clean(ev.After) + " through " + clean(ev.Cursor) + " were pruned by retention before this watch read them"
	case a != nil:
		return head + "  " + clean(a.ID) + "  " + subjectLine(*a) + "  " + eventDetail(ev, *a)
	case ev.SessionID != "":
		return head + "  session " + clean(ev.SessionID) + "  by " + clean(ev.Actor)
	case ev.GrantID != "":
		return head + "  grant " + clean(ev.GrantID) + "  by " + clean(ev.Actor)
	}
	return head + "  by " + clean(ev.Actor)
}

// eventDetail says what an approval event means.
func eventDetail(ev api.Event, a api.Approval) string {
	switch ev.Type {
	case "requested":
		by := clean(a.RequestedBy)
		if a.OnBehalfOf != "" {
			by += " for " + clean(a.OnBehalfOf)
		}
		// Counted from the event, so a replayed request shows the time it
		// was given rather than "0s" once its deadline has passed.
		left := time.Until(a.ExpiresAt)
		if !ev.At.IsZero() {
			left = a.ExpiresAt.Sub(ev.At)
		}
		left = left.Round(time.Second)
		return fmt.Sprintf("by %s, rule %q, %d approval(s) needed, expires in %v: %s",
			by, clean(a.Rule), max(a.RequiredApprovals, 1), max(left, 0), argsLine(a.Arguments))
	case "reviewed":
		for i, rv := range a.Reviews {
			if rv.By == ev.Actor {
				s := fmt.Sprintf("%s by %s", clean(rv.Verdict), clean(rv.By))
				if rv.Reason != "" {
					s += ": " + clean(rv.Reason)
				}
				// The event carries the approval as it is when read: count
				// the approving reviews up to this one, so a replayed first
				// of two says "1 of 2", as it did live.
				upTo := a
				upTo.Reviews = a.Reviews[:i+1]
				return s + fmt.Sprintf(" (%d of %d approvals)", approvals(upTo), max(a.RequiredApprovals, 1))
			}
		}
		return "by " + clean(ev.Actor)
	case "approved", "denied":
		s := "by " + clean(ev.Actor)
		if ev.Type == "denied" && a.Reason != "" {
			s += ": " + clean(a.Reason)
		}
		return s
	case "expired", "cancelled", "invalidated":
		if a.Reason != "" {
			return clean(a.Reason)
		}
		return ""
	case "dispatched":
		return "outcome " + clean(a.DispatchOutcome)
	}
	return "by " + clean(ev.Actor)
}

// argsLine is the display copy on one line, cut at 120 characters.
func argsLine(args json.RawMessage) string { return argsCut(args, 120) }

// argsCut is the display copy on one line, escaped, cut at n characters
// (the last of them "…" when cut).
func argsCut(args json.RawMessage, n int) string {
	var b bytes.Buffer
	if err := json.Compact(&b, args); err != nil {
		b.Reset()
		b.Write(args)
	}
	s := clean(string(api.EscapeJSONShown(b.Bytes())))
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
