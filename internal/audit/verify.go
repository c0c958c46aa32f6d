package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// Reader is what Verify and Export read (sqlstore.DB implements it).
type Reader interface {
	// AuditChain returns the head: the last link and the anchor.
	AuditChain(ctx context.Context) (store.AuditHead, error)
	// AuditLog returns the links f selects in seq order.
	AuditLog(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error)
}

// Result is what Verify found. Its JSON (`toolgate audit verify --json`)
// uses the snake_case names of the tags, as the rest of the API does.
type Result struct {
	// OK: every link from the anchor to the head verifies.
	OK bool `json:"ok"`
	// Links is how many links were checked.
	Links int64 `json:"links"`
	// Anchor and AnchorHash: where the kept chain starts (the last pruned
	// link; 0 and "" when nothing was pruned).
	Anchor     int64  `json:"anchor"`
	AnchorHash string `json:"anchor_hash"`
	// Head and HeadHash: the head as recorded, the value to keep elsewhere
	// (docs/audit.md: anchoring the tail).
	Head     int64  `json:"head"`
	HeadHash string `json:"head_hash"`
	// BrokenSeq is the first sequence number at which the chain does not
	// verify (0 when OK), and Problem says why.
	BrokenSeq int64  `json:"broken_seq"`
	Problem   string `json:"problem"`
}

// verifyPage is how many links Verify reads at a time.
const verifyPage = 1000

// Verify walks the chain from its anchor to its head and reports the first
// link that does not verify: a missing sequence number (a deleted link), a
// link whose prev_hash is not its predecessor's hash, whose record is not
// the canonical JSON of a record with its own seq, time and tenant, or
// whose hash is not the hash of prev_hash and record; and a chain that
// ends before the head says it does. It reads every link once, in pages.
// An error means the store could not be read (nothing was decided).
func Verify(ctx context.Context, r Reader) (Result, error) {
	head, err := r.AuditChain(ctx)
	if err != nil {
		return Result{}, err
	}
	res := Result{Anchor: head.AnchorSeq, AnchorHash: head.AnchorHash, Head: head.Seq, HeadHash: head.Hash}
	prev, want := head.AnchorHash, head.AnchorSeq+1
	after := head.AnchorSeq
	broken := func(seq int64, format string, args ...any) (Result, error) {
		res.BrokenSeq, res.Problem = seq, fmt.Sprintf(format, args...)
		return res, nil
	}
	for {
		links, err := r.AuditLog(ctx, store.AuditFilter{AfterSeq: after, Limit: verifyPage})
		if err != nil {
			return Result{}, err
		}
		for _, l := range links {
			if l.Seq != want {
				if want > head.Seq {
					return broken(l.Seq, "link %d is past the head %d", l.Seq, head.Seq)
				}
				return broken(want, "link %d is missing (the next link is %d)", want, l.Seq)
			}
			if l.PrevHash != prev {
				return broken(l.Seq, "prev_hash %s is not the hash of link %d (%s): link %d was edited and its hash recomputed, or this link was replaced", l.PrevHash, l.Seq-1, prev, l.Seq-1)
			}
			if problem := checkRecord(l); problem != "" {
				return broken(l.Seq, "%s", problem)
			}
			if h := LinkHash(l.PrevHash, l.Record); h != l.Hash {
				return broken(l.Seq, "the stored hash %s is not the hash of its prev_hash and record (%s): the record or the hash was edited", l.Hash, h)
			}
			prev, want, after = l.Hash, want+1, l.Seq
			res.Links++
		}
		if len(links) < verifyPage {
			break
		}
	}
	if want <= head.Seq {
		return broken(want, "link %d is missing: the chain ends at %d but its head is %d", want, want-1, head.Seq)
	}
	if prev != head.Hash {
		return broken(head.Seq, "the head's hash %s is not the last link's (%s)", head.Hash, prev)
	}
	res.OK = true
	return res, nil
}

// checkRecord says what is wrong with l's record, "" when nothing: it must
// be canonical JSON whose seq, at and tenant are the link's.
func checkRecord(l store.AuditEntry) string {
	c, err := approval.Canonicalize(l.Record)
	if err != nil {
		return fmt.Sprintf("record is not valid JSON: %v", err)
	}
	if !bytes.Equal(c, l.Record) {
		return "record is not in canonical form"
	}
	var r Record
	if err := json.Unmarshal(l.Record, &r); err != nil {
		return fmt.Sprintf("record does not decode: %v", err)
	}
	switch {
	case r.Seq != l.Seq:
		return fmt.Sprintf("record says seq %d", r.Seq)
	case r.At != Time(l.At):
		return fmt.Sprintf("record says at %s, the row %s", r.At, Time(l.At))
	case r.Tenant != l.Tenant:
		return fmt.Sprintf("record says tenant %q, the row %q", r.Tenant, l.Tenant)
	}
	return ""
}
