package approval

import "encoding/json"

// Parsed is one parse of a call's arguments, for a caller that needs both
// their hash and their display copy (the gate, making an approval
// request): Hash and Display of a Parsed give what Hash and Display of the
// raw arguments give, without parsing them again. It holds a copy of the
// arguments and their tree (12 bytes per value): a caller keeps it no
// longer than it needs the two. Its methods do not change it, so either
// may come first, and both may be called any number of times (not
// concurrently).
type Parsed struct {
	t    tree
	size int // the length of the parsed document
}

// Parse parses the arguments raw once for [Parsed.Hash] and
// [Parsed.Display]. Empty or nil raw parses as {}, as for Hash. Errors are
// those of Hash (and Display): they wrap ErrInvalidJSON or ErrDuplicateKey.
func Parse(raw json.RawMessage) (*Parsed, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	t, err := parse(raw)
	if err != nil {
		return nil, err
	}
	return &Parsed{t: t, size: len(raw)}, nil
}

// Hash is Hash of the parsed arguments: "sha256:" and 64 lowercase hex
// digits.
func (p *Parsed) Hash() string { return hashTree(&p.t, p.size) }

// Display is Display of the parsed arguments with rd: the display copy
// and its warnings (never nil).
func (p *Parsed) Display(rd Redaction) (json.RawMessage, []string) {
	return display(&p.t, p.size, rd)
}
