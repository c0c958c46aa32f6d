package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
)

// Errors of argument decoding. Their text never quotes an argument value.
var (
	errArgsNotObject = errors.New("the arguments are not a JSON object")
	errArgsBadJSON   = errors.New("the arguments are not valid JSON")
	errArgsDupKey    = errors.New("the arguments repeat an object key")
	errArgsFoldKey   = errors.New("the arguments hold two object keys that differ only in case, which an upstream decoding with Go's encoding/json reads as one")
	errArgsUTF8      = errors.New("the arguments are not valid UTF-8")
)

// Number errors: a JSON number that has no exact CEL value.
const (
	msgIntRange = "a number in the arguments is an integer beyond the int64 range, which conditions cannot compare exactly"
	msgInf      = "a number in the arguments is too large for a double (not finite)"
	msgInexact  = "a decimal number in the arguments has more precision than a double holds, so conditions would see a rounded value"
)

// decodeArgs decodes raw call arguments for CEL conditions. The result is a
// map[string]any whose values are CEL-ready: objects are map[string]any,
// arrays []any, strings string, booleans bool, null nil, and numbers
// CEL values:
//
//   - an integer literal (no fraction, no exponent) in the int64 range is
//     an int; beyond it the value is an error (never a rounded double, never
//     a uint);
//   - any other number is a double, but only when the literal is the
//     shortest decimal naming its double (how Go and JavaScript print
//     doubles: 0.1, 2.5e-8, 100.0 read as 100); a literal with more digits
//     than a double holds, or one that underflows to zero, is an error, and
//     so is one beyond the double range.
//
// An erroneous number is kept as a CEL error value, so only a condition that
// reads it fails. Nil or "null" arguments decode to an empty object; other
// non-objects, invalid JSON or UTF-8, and repeated keys (which upstreams
// resolve differently) are errors for the whole arguments; so are two keys
// of one object equal under Unicode simple case folding ("path" and
// "PATH"): an upstream decoding into a struct with Go's encoding/json
// matches keys case-insensitively and keeps the last, where a condition
// reads args.path.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	if raw[0] != '{' {
		return nil, errArgsNotObject
	}
	if !utf8.Valid(raw) {
		return nil, errArgsUTF8
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errArgsBadJSON
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errArgsNotObject
	}
	return m, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, errArgsBadJSON
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := map[string]any{}
			var folded map[string]struct{} // foldsWithKey's index of m's keys
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, errArgsBadJSON
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errArgsBadJSON
				}
				if _, dup := m[k]; dup {
					return nil, errArgsDupKey
				}
				if foldsWithKey(m, &folded, k) {
					return nil, errArgsFoldKey
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				m[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, errArgsBadJSON
			}
			return m, nil
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, errArgsBadJSON
			}
			return l, nil
		}
		return nil, errArgsBadJSON
	case json.Number:
		return numberValue(string(t)), nil
	case string, bool, nil:
		return t, nil
	}
	return nil, errArgsBadJSON
}

// numberValue turns a JSON number literal into a CEL value: types.Int,
// types.Double, or a CEL error (see decodeArgs).
func numberValue(lit string) any {
	if !strings.ContainsAny(lit, ".eE") {
		i, err := strconv.ParseInt(lit, 10, 64)
		if err != nil {
			return types.NewErr(msgIntRange)
		}
		return types.Int(i)
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		// ErrRange: beyond the double range (an underflow returns 0
		// without an error and is caught below).
		return types.NewErr(msgInf)
	}
	if !exactDouble(lit, f) {
		return types.NewErr(msgInexact)
	}
	return types.Double(f)
}

// exactDouble reports whether the decimal literal lit has the value of the
// shortest decimal that names f.
func exactDouble(lit string, f float64) bool {
	if f == 0 {
		// Zero, or an underflow. Never hand big.Rat an exponent the
		// literal's length does not bound (1e-999999999 would take it ages).
		mant, _, _ := strings.Cut(strings.ToLower(lit), "e")
		return strings.Trim(mant, "-+0.") == ""
	}
	// f is finite and not zero, so the literal's exponent is bounded by
	// its length plus the double range.
	short := strconv.FormatFloat(f, 'g', -1, 64)
	if short == lit {
		return true
	}
	a, ok1 := new(big.Rat).SetString(lit)
	b, ok2 := new(big.Rat).SetString(short)
	return ok1 && ok2 && a.Cmp(b) == 0
}

// argError is the CEL value of "args" when the arguments cannot be decoded.
func argError(err error) any {
	return types.NewErr("%s", fmt.Sprint(err))
}

// foldsWithKey reports whether k, a key not in m yet, equals one of m's
// keys under simple case folding. Up to foldScan keys it compares with
// strings.EqualFold (no allocation); past them it keeps the FoldKey of
// every key in *folded.
func foldsWithKey(m map[string]any, folded *map[string]struct{}, k string) bool {
	if len(m) < foldScan {
		for prev := range m {
			if strings.EqualFold(prev, k) {
				return true
			}
		}
		return false
	}
	if *folded == nil {
		*folded = make(map[string]struct{}, 2*len(m))
		for prev := range m {
			(*folded)[FoldKey(prev)] = struct{}{}
		}
	}
	f := FoldKey(k)
	if _, dup := (*folded)[f]; dup {
		return true
	}
	(*folded)[f] = struct{}{}
	return false
}

// foldScan is how many keys foldsWithKey compares one by one.
const foldScan = 16

// FoldKey maps s to a canonical form under Unicode simple case folding:
// each rune becomes the smallest rune of its folding orbit, so two
// strings have the same key exactly when strings.EqualFold says they are
// equal (for valid UTF-8). Go's encoding/json matches object keys to
// struct fields this way.
func FoldKey(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == utf8.RuneError {
			b.WriteRune(r)
			continue
		}
		lowest := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			lowest = min(lowest, f)
		}
		b.WriteRune(lowest)
	}
	return b.String()
}
