package audit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"toolgate/internal/approval"
)

// canonicalPlain writes the canonical JSON of a record without a monitor
// verdict (every allowed call's: issue 13, the audit trail's append was
// 4 % of toolgate's CPU per allowed call in a profile) directly: the
// members json.Marshal writes for it (omitempty), keys in RFC 8785 order
// (all ASCII, so byte order), strings as approval.Canonicalize writes
// them, integers in decimal, the display copy of the arguments
// canonicalized on its own. ok false (the caller canonicalizes the
// encoding) for a record with a monitor verdict, a string that is not
// valid UTF-8 (json.Marshal replaces its bad bytes) and arguments
// Canonicalize refuses. TestCanonicalPlainIsCanonicalize checks it
// against canonicalDecoded.
func (r Record) canonicalPlain() ([]byte, bool) {
	if r.Monitor != nil {
		return nil, false
	}
	var args []byte
	if len(r.Arguments) > 0 {
		args = r.argumentsCanonical
	}
	if len(r.Arguments) > 0 && args == nil {
		// The display copy's canonical form is the record's member:
		// json.Marshal only compacts it (and escapes HTML characters,
		// which Canonicalize writes literally again).
		if !json.Valid(r.Arguments) {
			return nil, false // json.Marshal refuses it: one value only
		}
		// In a list, so that it nests as deep as in the record (what
		// Canonicalize refuses past MaxDepth there, it refuses here).
		in := make([]byte, 0, len(r.Arguments)+2)
		in = append(append(append(in, '['), r.Arguments...), ']')
		c, err := approval.Canonicalize(in)
		if err != nil || len(c) <= 2 {
			return nil, false
		}
		args = c[1 : len(c)-1]
	}
	var b bytes.Buffer
	b.Grow(r.plainSize(len(args)))
	w := canonWriter{b: &b}
	b.WriteByte('{')
	// Sorted by key; seq, at and type are always written.
	ok := w.str("actor", r.Actor, false) &&
		w.str("approval_id", r.ApprovalID, false)
	if args != nil {
		w.key("arguments")
		b.Write(args)
	}
	ok = ok && w.str("arguments_hash", r.ArgumentsHash, false) &&
		w.str("at", r.At, true) &&
		w.str("code", r.Code, false) &&
		w.strs("display_warnings", r.DisplayWarnings)
	w.int("event_seq", r.EventSeq, false)
	ok = ok && w.str("grant_id", r.GrantID, false) &&
		w.str("kind", r.Kind, false) &&
		w.str("on_behalf_of", r.OnBehalfOf, false) &&
		w.str("outcome", r.Outcome, false) &&
		w.str("policy", r.Policy, false)
	w.int("policy_revision", r.PolicyRevision, false)
	ok = ok && w.str("principal", r.Principal, false) &&
		w.str("reason", r.Reason, false) &&
		w.str("rule", r.Rule, false)
	w.int("seq", r.Seq, true)
	ok = ok && w.str("server", r.Server, false) &&
		w.str("session_id", r.SessionID, false) &&
		w.str("state", r.State, false) &&
		w.str("tenant", r.Tenant, false) &&
		w.str("tool", r.Tool, false) &&
		w.str("type", r.Type, true) &&
		w.str("verdict", r.Verdict, false)
	if !ok {
		return nil, false
	}
	b.WriteByte('}')
	return b.Bytes(), true
}

// plainSize is about the length of canonicalPlain's output for r with
// canonical arguments of n bytes: each member it writes, key and value,
// and a little room for escapes. Growing the buffer from a fixed 256
// bytes took two allocations for most records, ≈ 1 KB for one of 400
// bytes (≈ 4 KB of the audit chain's flush per approval in approve-all,
// alloc41); a string with many escapes still grows it.
func (r Record) plainSize(n int) int {
	size := 2 + len(`"arguments":,`) + n
	for _, m := range [...]struct{ k, v string }{
		{"actor", r.Actor}, {"approval_id", r.ApprovalID}, {"arguments_hash", r.ArgumentsHash},
		{"at", r.At}, {"code", r.Code}, {"grant_id", r.GrantID}, {"kind", r.Kind}, {"on_behalf_of", r.OnBehalfOf},
		{"outcome", r.Outcome}, {"policy", r.Policy}, {"principal", r.Principal}, {"reason", r.Reason},
		{"rule", r.Rule}, {"server", r.Server}, {"session_id", r.SessionID}, {"state", r.State},
		{"tenant", r.Tenant}, {"tool", r.Tool}, {"type", r.Type}, {"verdict", r.Verdict},
	} {
		if m.v != "" {
			size += len(m.k) + len(m.v) + len(`"":"",`)
		}
	}
	if len(r.DisplayWarnings) > 0 {
		size += len(`"display_warnings":[],`)
		for _, w := range r.DisplayWarnings {
			size += len(w) + len(`"",`)
		}
	}
	for _, m := range [...]struct {
		k string
		v int64
	}{{"event_seq", r.EventSeq}, {"policy_revision", r.PolicyRevision}, {"seq", r.Seq}} {
		size += len(m.k) + len(`"":,`) + decimalLen(m.v)
	}
	return size + size/32
}

// decimalLen is the length of v in decimal, sign included.
func decimalLen(v int64) int {
	n := 1
	if v < 0 {
		n++
	}
	for ; v >= 10 || v <= -10; v /= 10 {
		n++
	}
	return n
}

// canonWriter writes the members of one canonical JSON object.
type canonWriter struct {
	b *bytes.Buffer
	n int
}

func (w *canonWriter) key(k string) {
	if w.n > 0 {
		w.b.WriteByte(',')
	}
	w.n++
	w.b.WriteByte('"')
	w.b.WriteString(k)
	w.b.WriteString(`":`)
}

// str writes k: v unless v is empty and !always; false when v is not
// valid UTF-8.
func (w *canonWriter) str(k, v string, always bool) bool {
	if v == "" && !always {
		return true
	}
	if !utf8.ValidString(v) {
		return false
	}
	w.key(k)
	approval.WriteCanonicalString(w.b, v)
	return true
}

// strs writes k: v as a list of strings unless v is empty; false when a
// string is not valid UTF-8.
func (w *canonWriter) strs(k string, v []string) bool {
	if len(v) == 0 {
		return true
	}
	for _, s := range v {
		if !utf8.ValidString(s) {
			return false
		}
	}
	w.key(k)
	w.b.WriteByte('[')
	for i, s := range v {
		if i > 0 {
			w.b.WriteByte(',')
		}
		approval.WriteCanonicalString(w.b, s)
	}
	w.b.WriteByte(']')
	return true
}

// int writes k: v unless v is 0 and !always.
func (w *canonWriter) int(k string, v int64, always bool) {
	if v == 0 && !always {
		return
	}
	w.key(k)
	w.b.Write(strconv.AppendInt(w.b.AvailableBuffer(), v, 10))
}
