package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// sdkTakesID reports whether the go-sdk v1.8.0 decoder takes raw, the id
// of a message that has one (not absent, not null): a JSON string, or a
// number within a float64 (it decodes an id into any and then refuses a
// bool, an object or an array, and a number past float64 fails the
// decode). On any other id the go-sdk ends its whole session when the
// message comes in an event stream (attack17), so the event tee must not
// pass such an event on as it came.
func sdkTakesID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch c := raw[0]; {
	case c == '"':
		// raw is a value of a message read as valid JSON: a string.
		return true
	case c == '-' || ('0' <= c && c <= '9'):
		// No decode: each event's id is checked, without an allocation
		// (TestSSETeeResponseWithoutSlotDecodesNothing).
		_, err := strconv.ParseFloat(string(raw), 64)
		return err == nil
	}
	return false
}
