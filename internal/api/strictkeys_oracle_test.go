package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"toolgate/internal/session"
)

// TestCheckKeysAsDecoded: checkKeys, which walks the document's bytes,
// answers as the decode into map[string]any it replaced (oldCheckKeys,
// kept here as the oracle) for random documents into the API's body
// types: keys in several cases and with escapes, repeated keys, nesting,
// white space; the same error text or none.
func TestCheckKeysAsDecoded(t *testing.T) {
	types := []reflect.Type{reflect.TypeFor[*ApproveBody](), reflect.TypeFor[*DenyBody](), reflect.TypeFor[*CreateSessionBody](),
		reflect.TypeFor[*ProposeBody](), reflect.TypeFor[*session.Change](), reflect.TypeFor[*json.RawMessage]()}
	keys := []string{"reason", "REASON", "Reason", "arguments_hash", "grant", "tools", "require_approval", "fs", "FS", "gh",
		"policy", "default", "Default", "rules", "base_revision", "k", "\u212a", `r\u0065ason`, `a\"b`, "straße", "STRASSE", ""}
	r := rand.New(rand.NewPCG(41, 41))
	var gen func(depth int) string
	gen = func(depth int) string {
		sp := []string{"", " ", "\n\t "}[r.IntN(3)]
		switch n := r.IntN(10); {
		case depth < 3 && n < 4:
			var b strings.Builder
			b.WriteString("{" + sp)
			for i := range r.IntN(4) {
				if i > 0 {
					b.WriteString("," + sp)
				}
				fmt.Fprintf(&b, `"%s"%s:%s%s`, keys[r.IntN(len(keys))], sp, sp, gen(depth+1))
			}
			b.WriteString(sp + "}")
			return b.String()
		case depth < 3 && n < 6:
			var b strings.Builder
			b.WriteString("[" + sp)
			for i := range r.IntN(3) {
				if i > 0 {
					b.WriteString("," + sp)
				}
				b.WriteString(gen(depth + 1))
			}
			b.WriteString(sp + "]")
			return b.String()
		default:
			return []string{`"x"`, `"a\"}]b"`, `1`, `-2.5e400`, `true`, `null`, `"\\"`, `""`}[r.IntN(8)]
		}
	}
	checked := 0
	for range 20000 {
		doc := gen(0)
		if !json.Valid([]byte(doc)) {
			t.Fatalf("generated invalid JSON %s", doc)
		}
		typ := types[r.IntN(len(types))]
		got, want := checkKeys([]byte(doc), typ), oldCheckKeys([]byte(doc), typ)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("checkKeys(%s, %v) = %v; the decode said %v", doc, typ, got, want)
		}
		if want != nil {
			checked++
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d documents refused: the generator does not reach the rules", checked)
	}
}

// oldCheckKeys is checkKeys as it was until alloc41: decode into
// map[string]any, then walk it.
func oldCheckKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return oldWalkKeys(v, t, "")
}

func oldWalkKeys(v any, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)) {
		t = nil
	}
	switch x := v.(type) {
	case map[string]any:
		if err := foldDuplicates(slices.Sorted(maps.Keys(x)), path); err != nil {
			return err
		}
		var fields map[string]reflect.Type
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = jsonFields(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			ft := elem
			if fields != nil {
				var ok bool
				if ft, ok = fields[k]; !ok {
					return fmt.Errorf("unknown key %q%s (want one of: %s; keys are case-sensitive)", k, at(path), strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
				}
			}
			if err := oldWalkKeys(x[k], ft, child(path, k)); err != nil {
				return err
			}
		}
	case []any:
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i, e := range x {
			if err := oldWalkKeys(e, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestCheckKeysAllocatesLittle: checking the keys of approve-all's body
// ({"reason":""}) makes a few allocations (the key, the member list, the
// field map), not a decoder, its buffer and a map of the document
// (4 now, 20 at 1ea6c5a).
func TestCheckKeysAllocatesLittle(t *testing.T) {
	body := []byte(`{"reason":""}`)
	typ := reflect.TypeFor[*ApproveBody]()
	n := testing.AllocsPerRun(100, func() {
		if err := checkKeys(body, typ); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%v allocations", n)
	if n > 10 {
		t.Errorf("checkKeys of %s made %v allocations, want at most 10", body, n)
	}
}
