// Package storetest is the conformance suite every store.Store backend must
// pass, unchanged: SQLite always, Postgres when its DSN is set (STYLE R6).
//
// A backend's test calls [Run] with a function that opens a fresh store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			cfg := sqlstore.Config{Driver: sqlstore.DriverSQLite, Path: filepath.Join(t.TempDir(), "t.db")}
//			db, err := sqlstore.Open(t.Context(), cfg)
//			if err != nil { t.Fatal(err) }
//			t.Cleanup(func() { db.Close() })
//			return db
//		})
//	}
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Run runs the conformance suite against the stores open returns. Each
// subtest calls open once and runs in parallel with the others (t.Parallel),
// so open must return an empty store not shared with any other call, safe
// to use while other stores are in use, and must arrange for it to be closed
// (t.Cleanup). Subtests use the store from several goroutines at once.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"CreateGet", testCreateGet},
		{"AlreadyExists", testAlreadyExists},
		{"NotFound", testNotFound},
		{"List", testList},
		{"ListDefaultLimit", testListDefaultLimit},
		{"DecideExactlyOnce", testDecideExactlyOnce},
		{"FnErrorWritesNothing", testFnErrorWritesNothing},
		{"ExpiryNeverOverwritesDecision", testExpiryNeverOverwritesDecision},
		{"Due", testDue},
		{"NextDue", testNextDue},
		{"TimesRoundTripUTCms", testTimesRoundTripUTCms},
		{"Events", testEvents},
		{"CountPending", testCountPending},
		{"Ping", testPing},
		{"OpenIdentical", testOpenIdentical},
		{"ListByKind", testListByKind},
	}
	tests = append(tests, sessionTests...)
	tests = append(tests, policyTests...)
	tests = append(tests, inboxTests...)
	tests = append(tests, ledgerTests...)
	tests = append(tests, pressureTests...)
	tests = append(tests, grantTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

// t0 is the suite's reference time; fixtures are built around it.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// id returns a UUIDv7-shaped id; ids sort by (group, n), and ids of one
// group share the prefix groupPrefix(group).
func id(group, n int) approval.ID {
	return approval.ID(fmt.Sprintf("%s-0000-7000-8000-%012x", groupPrefix(group), n))
}

func groupPrefix(group int) string { return fmt.Sprintf("0190%04x", group) }

// pending returns a pending request with id i, requested by "desktop" on
// behalf of "carol" in tenant "acme", created at t0, expiring at t0+10m,
// needing one approval from anyone, valid for 10m once approved.
func pending(i approval.ID) approval.Request {
	return approval.Request{
		ID:                i,
		State:             approval.StatePending,
		Server:            "pay",
		Tool:              "transfer",
		Arguments:         json.RawMessage(`{"to":"acct-9","amount":12}`),
		ArgumentsHash:     "sha256:9f2c8f7b5f0e4d0a7c1b3e6d2a4f8c0b1e3d5f7a9c2b4d6e8f0a1c3e5d7f9b2a",
		ToolDigest:        "sha256:1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809",
		Rule:              "payments need two",
		Mode:              "hold",
		RequestedBy:       "desktop",
		OnBehalfOf:        "carol",
		Tenant:            "acme",
		CreatedAt:         t0,
		ExpiresAt:         t0.Add(10 * time.Minute),
		RequiredApprovals: 1,
		ValidFor:          10 * time.Minute,
	}
}

// reviewer returns a reviewer with no groups.
func reviewer(name string) approval.Reviewer { return approval.Reviewer{ID: name} }

// cmpRequest compares requests as stored: nil and empty slices are equal
// (a backend may return either), times compare with Equal.
var cmpRequest = cmpopts.EquateEmpty()

func mustCreate(t *testing.T, s store.Store, r approval.Request) {
	t.Helper()
	if err := s.CreateRequest(t.Context(), r); err != nil {
		t.Fatalf("CreateRequest(%s) = %v", r.ID, err)
	}
}

func mustGet(t *testing.T, s store.Store, i approval.ID) approval.Request {
	t.Helper()
	r, err := s.GetRequest(t.Context(), i)
	if err != nil {
		t.Fatalf("GetRequest(%s) = %v", i, err)
	}
	return r
}

// mustUpdate runs fn through UpdateRequest as actor and fails the test on
// any error.
func mustUpdate(t *testing.T, s store.Store, i approval.ID, actor string, fn func(*approval.Request) error) approval.Request {
	t.Helper()
	r, err := s.UpdateRequest(t.Context(), i, actor, fn)
	if err != nil {
		t.Fatalf("UpdateRequest(%s) = %v", i, err)
	}
	return r
}

// mustReview records a review by name at `at` through UpdateRequest.
func mustReview(t *testing.T, s store.Store, i approval.ID, name string, v approval.Verdict, at time.Time) approval.Request {
	t.Helper()
	return mustUpdate(t, s, i, name, func(r *approval.Request) error {
		return r.Review(reviewer(name), v, "looks fine", "", at)
	})
}

// allEvents reads the whole event log, a page of 2 at a time so paging by
// Seq is exercised too.
func allEvents(t *testing.T, s store.Store) []approval.Event {
	t.Helper()
	var all []approval.Event
	var after int64
	for {
		evs, err := s.Events(t.Context(), after, 2)
		if err != nil {
			t.Fatalf("Events(%d, 2) = %v", after, err)
		}
		if len(evs) > 2 {
			t.Fatalf("Events(%d, 2) returned %d events", after, len(evs))
		}
		if len(evs) == 0 {
			return all
		}
		for _, ev := range evs {
			if ev.Seq <= after {
				t.Fatalf("Events(%d, 2): seq %d not increasing", after, ev.Seq)
			}
			after = ev.Seq
		}
		all = append(all, evs...)
	}
}

// eventsOf returns the events of request i, in order.
func eventsOf(evs []approval.Event, i approval.ID) []approval.Event {
	var out []approval.Event
	for _, ev := range evs {
		if ev.RequestID == i {
			out = append(out, ev)
		}
	}
	return out
}

// types lists the types of evs.
func types(evs []approval.Event) []approval.EventType {
	var out []approval.EventType
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// requireAllSet fails when a field of r is zero, so that a field added to
// approval.Request later is not silently left out of the round-trip test.
func requireAllSet(t *testing.T, r approval.Request) {
	t.Helper()
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("fixture leaves Request.%s zero; set it so its round-trip is tested", v.Type().Field(i).Name)
		}
	}
}

// isLost reports whether err is what a concurrent loser may see.
func isLost(err error) bool {
	return errors.Is(err, approval.ErrResolved) || errors.Is(err, approval.ErrConflict)
}

func diffRequests(t *testing.T, what string, want, got approval.Request) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpRequest); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, diff)
	}
}
