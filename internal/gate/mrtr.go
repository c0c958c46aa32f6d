package gate

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Multi round-trip requests (SEP-2322) for calls that need approval: a
// 2026-era client that can show its user a URL gets, instead of a held
// call, an input_required result asking it to open the approval's inbox
// page, and a requestState to send back with its next round. The state
// comes back from the client, so it is attacker-controlled: it is signed
// with the shared key, names the principal, the call (server, tool, kind,
// argument hash) and the approval, expires with the approval, and is
// single-use (its nonce is recorded in the store the first time it is
// presented). The caller's answer to the elicitation is never a decision:
// only the store says whether the approval was decided.

// ErrBadRequestState is returned for a requestState that does not verify:
// tampered, made by another key, for another principal or call, expired,
// or used before.
var ErrBadRequestState = errors.New("invalid requestState")

const labelRequestState = "request-state"

// requestState is the signed payload of a requestState.
type requestState struct {
	V         int    `json:"v"`
	Approval  string `json:"a"`
	Principal string `json:"p"`
	Server    string `json:"s"`
	Tool      string `json:"t"`
	Kind      string `json:"k,omitempty"`
	Hash      string `json:"h"`
	Expires   int64  `json:"e"` // unix milliseconds
	Nonce     string `json:"n"`
}

// RequestState returns a new requestState for the next round of a call
// waiting on r: valid until r can no longer run (its expiry, plus its
// validity once approved), for one use.
func (g *Gate) RequestState(r approval.Request) (string, error) {
	if !g.opts.Key.Valid() {
		return "", errors.New("no key to sign a requestState")
	}
	nonce := rand.Text()
	b, err := json.Marshal(requestState{
		V: 1, Approval: string(r.ID), Principal: r.RequestedBy, Server: r.Server, Tool: r.Tool, Kind: r.Kind,
		Hash: r.ArgumentsHash, Expires: r.ExpiresAt.Add(r.ValidFor).UnixMilli(), Nonce: nonce,
	})
	if err != nil {
		return "", err
	}
	return g.opts.Key.Sign(labelRequestState, b), nil
}

// OpenRequestState verifies a requestState c's caller sent back and
// returns the approval it names, for c.Resume. The state must verify, be
// c's (principal, server, tool, kind, argument hash), not have expired,
// and not have been used before, except when its approval was consumed:
// then presenting it again gets the recorded result (no second run).
func (g *Gate) OpenRequestState(ctx context.Context, state string, c Call) (approval.ID, error) {
	payload, err := g.opts.Key.Verify(labelRequestState, state)
	if err != nil {
		return "", ErrBadRequestState
	}
	var s requestState
	if err := json.Unmarshal(payload, &s); err != nil || s.V != 1 {
		return "", ErrBadRequestState
	}
	hash, err := approval.Hash(c.Arguments)
	if err != nil {
		return "", fmt.Errorf("%w: invalid arguments: %w", ErrBadRequestState, err)
	}
	kind := c.Kind
	if kind == approval.KindToolCall {
		kind = ""
	}
	switch {
	case s.Principal != c.Principal.ID:
		return "", fmt.Errorf("%w: it was issued to another caller", ErrBadRequestState)
	case s.Server != c.Server || s.Tool != c.Tool || s.Kind != kind || s.Hash != hash:
		return "", fmt.Errorf("%w: it was issued for another call (the retry must repeat the original request's name and arguments)", ErrBadRequestState)
	case !g.now().Before(time.UnixMilli(s.Expires)):
		return "", fmt.Errorf("%w: it expired", ErrBadRequestState)
	}
	id := approval.ID(s.Approval)
	err = g.store.UseRequestState(ctx, s.Nonce, id, time.UnixMilli(s.Expires).Add(g.opts.ResultTTL))
	switch {
	case err == nil:
		return id, nil
	case errors.Is(err, store.ErrAlreadyExists):
		r, gerr := g.store.GetRequest(ctx, id)
		if gerr == nil && r.State == approval.StateConsumed {
			return id, nil // its result is replayed, never run again
		}
		return "", fmt.Errorf("%w: it was used already (each requestState is good for one round)", ErrBadRequestState)
	}
	return "", err
}

// Relayed rounds (SEP-2322 from an upstream). An upstream that answers a
// call with input_required gives a requestState of its own; toolgate never
// hands it to the agent as it is: it is wrapped in a state toolgate signs,
// bound to the caller and the call (principal, server, tool, kind,
// argument hash), valid for RelayStateTTL and single-use. On the agent's
// next round OpenRelayState verifies it and returns the upstream's state
// to send back upstream with the agent's inputResponses. The round is a
// new call: the gateway admits it through the gate like any other (the
// state proves which round it continues, never that it may run).

// RelayStateTTL is how long a wrapped upstream requestState can be sent
// back: a round the agent's user answers (an elicitation form, a sampling
// request) takes seconds to minutes.
const RelayStateTTL = 15 * time.Minute

const labelRelayState = "relay-state"

// ErrNotRelayState is returned by OpenRelayState for a state that is not
// a relayed round's (it may be an approval round's: OpenRequestState).
var ErrNotRelayState = errors.New("not a relayed requestState")

// relayState is the signed payload of a wrapped upstream requestState.
type relayState struct {
	V         int    `json:"v"`
	Principal string `json:"p"`
	Server    string `json:"s"`
	Tool      string `json:"t"`
	Kind      string `json:"k,omitempty"`
	Hash      string `json:"h"`
	Upstream  string `json:"u,omitempty"` // the upstream's requestState, verbatim
	Expires   int64  `json:"e"`           // unix milliseconds
	Nonce     string `json:"n"`
}

// RelayState wraps upstream, the requestState of c's upstream answering
// c with input_required ("" when it gave none), in a signed single-use
// state for c's caller's next round, valid for RelayStateTTL.
func (g *Gate) RelayState(c Call, upstream string) (string, error) {
	if !g.opts.Key.Valid() {
		return "", errors.New("no key to sign a requestState")
	}
	hash, err := approval.Hash(c.Arguments)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(relayState{
		V: 1, Principal: c.Principal.ID, Server: c.Server, Tool: c.Tool, Kind: callKind(c),
		Hash: hash, Upstream: upstream, Expires: g.now().Add(RelayStateTTL).UnixMilli(), Nonce: rand.Text(),
	})
	if err != nil {
		return "", err
	}
	return g.opts.Key.Sign(labelRelayState, b), nil
}

// OpenRelayState verifies a relayed round's state c's caller sent back and
// returns the upstream's requestState it wraps. ErrNotRelayState: it is
// not signed as one (another kind of state, or tampered); ErrBadRequestState:
// it is for another caller or call, expired, or was used before.
func (g *Gate) OpenRelayState(ctx context.Context, state string, c Call) (string, error) {
	payload, err := g.opts.Key.Verify(labelRelayState, state)
	if err != nil {
		return "", ErrNotRelayState
	}
	var s relayState
	if err := json.Unmarshal(payload, &s); err != nil || s.V != 1 {
		return "", ErrBadRequestState
	}
	hash, err := approval.Hash(c.Arguments)
	if err != nil {
		return "", fmt.Errorf("%w: invalid arguments: %w", ErrBadRequestState, err)
	}
	switch {
	case s.Principal != c.Principal.ID:
		return "", fmt.Errorf("%w: it was issued to another caller", ErrBadRequestState)
	case s.Server != c.Server || s.Tool != c.Tool || s.Kind != callKind(c) || s.Hash != hash:
		return "", fmt.Errorf("%w: it was issued for another call (the next round must repeat the original request's name and arguments)", ErrBadRequestState)
	case !g.now().Before(time.UnixMilli(s.Expires)):
		return "", fmt.Errorf("%w: it expired", ErrBadRequestState)
	}
	err = g.store.UseRequestState(ctx, s.Nonce, "", time.UnixMilli(s.Expires))
	switch {
	case err == nil:
		return s.Upstream, nil
	case errors.Is(err, store.ErrAlreadyExists):
		return "", fmt.Errorf("%w: it was used already (each requestState is good for one round)", ErrBadRequestState)
	}
	return "", err
}

// callKind is c.Kind as states record it: "" for a tool call.
func callKind(c Call) string {
	if c.Kind == approval.KindToolCall {
		return ""
	}
	return c.Kind
}
