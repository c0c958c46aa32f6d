package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// checkKeys checks the object keys of the JSON document data, which is to
// be decoded into a value of type t, more strictly than encoding/json does
// (issue 9 item 17): encoding/json matches keys to fields without regard
// to case, so {"REASON": "x"} would set Reason and {"reason": "a",
// "REASON": "b"} would keep one of them silently. It reports:
//
//   - two keys of one object (anywhere in the document) that are equal
//     under Unicode simple case folding;
//   - a key of an object decoded into a struct that is not exactly the
//     JSON name of one of its fields, so a key in another case is unknown.
//
// Values decoded by their own UnmarshalJSON (or as json.RawMessage, any)
// are checked for the first rule only. data must be valid JSON.
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return walkKeys(v, t, "")
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// walkKeys checks v (decoded into any) against t; t nil means "no struct
// here" (only the case-fold rule). path names where v is, for messages.
func walkKeys(v any, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)) {
		t = nil // decoded by its own rules
	}
	switch x := v.(type) {
	case map[string]any:
		if err := foldDuplicates(x, path); err != nil {
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
			if err := walkKeys(x[k], ft, child(path, k)); err != nil {
				return err
			}
		}
	case []any:
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i, e := range x {
			if err := walkKeys(e, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// foldDuplicates reports two keys of m that are equal under simple case
// folding.
func foldDuplicates(m map[string]any, path string) error {
	seen := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		f := foldKey(k)
		if prev, dup := seen[f]; dup {
			return fmt.Errorf("keys %q and %q%s differ only in case", prev, k, at(path))
		}
		seen[f] = k
	}
	return nil
}

// foldKey maps s to a canonical form under Unicode simple case folding:
// each rune becomes the smallest rune of its folding orbit, so two
// strings have the same key exactly when strings.EqualFold says they are
// equal (for valid UTF-8).
func foldKey(s string) string {
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

// jsonFields maps the JSON names of struct type t's exported fields to
// their types (embedded structs without a tag contribute their fields).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && tag == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// at says where a key is: "" at the top, " in <path>" below.
func at(path string) string {
	if path == "" {
		return ""
	}
	return " in " + path
}

// child is the path of key k under path.
func child(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
