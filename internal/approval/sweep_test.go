package approval

import (
	"errors"
	"testing"
	"time"
)

func TestAnswer(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		r       Request
		wantErr error
	}{
		{"denied", Request{State: StateDenied}, nil},
		{"denied and answered", Request{State: StateDenied, AnsweredAt: t0}, ErrResolved},
		{"pending", Request{State: StatePending}, ErrResolved},
		{"approved", Request{State: StateApproved}, ErrResolved},
		{"expired", Request{State: StateExpired}, ErrResolved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			err := r.Answer(t0.Add(time.Second))
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Answer = %v, want %v", err, tt.wantErr)
			}
			if err == nil && !r.AnsweredAt.Equal(t0.Add(time.Second)) {
				t.Fatalf("AnsweredAt = %v", r.AnsweredAt)
			}
			if err != nil && !r.AnsweredAt.Equal(tt.r.AnsweredAt) {
				t.Fatalf("a refused Answer changed AnsweredAt")
			}
		})
	}
}

func TestSweep(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		r           Request
		wantErr     error
		wantState   State
		wantOutcome Outcome
	}{
		{"pending not due", Request{State: StatePending, ExpiresAt: t0.Add(time.Minute)}, ErrNotDue, StatePending, ""},
		{"pending due", Request{State: StatePending, ExpiresAt: t0}, nil, StateExpired, ""},
		{"approved unused", Request{State: StateApproved, DecidedAt: t0.Add(-time.Hour), ValidFor: time.Minute, ExpiresAt: t0.Add(time.Hour)}, nil, StateExpired, ""},
		{"consumed, dispatcher alive", Request{State: StateConsumed, HeldBy: "i1", LeaseUntil: t0.Add(time.Second)}, ErrNotDue, StateConsumed, ""},
		{"consumed, dispatcher died", Request{State: StateConsumed, HeldBy: "i1", LeaseUntil: t0}, nil, StateConsumed, OutcomeUnknown},
		{"consumed, no holder", Request{State: StateConsumed}, ErrNotDue, StateConsumed, ""},
		{"consumed with outcome", Request{State: StateConsumed, HeldBy: "i1", LeaseUntil: t0.Add(-time.Hour), DispatchOutcome: OutcomeOK}, ErrResolved, StateConsumed, OutcomeOK},
		{"denied", Request{State: StateDenied}, ErrResolved, StateDenied, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			err := r.Sweep(t0)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Sweep = %v, want %v", err, tt.wantErr)
			}
			if r.State != tt.wantState || r.DispatchOutcome != tt.wantOutcome {
				t.Fatalf("after Sweep: %s/%q, want %s/%q", r.State, r.DispatchOutcome, tt.wantState, tt.wantOutcome)
			}
		})
	}
}
