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
	"unicode/utf8"

	"toolgate/internal/policy"
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
//
// It walks data's bytes (keyWalker) instead of decoding it into
// map[string]any first: that decode, for a body of a few bytes, was most
// of the 1.7 KB checkKeys allocated per approval in approve-all (alloc41).
func checkKeys(data []byte, t reflect.Type) error {
	w := keyWalker{data: data}
	return w.value(w.space(0), t, "")
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// A keyWalker walks the valid JSON document data for checkKeys.
type keyWalker struct{ data []byte }

// member is one member of an object: its key and where its value starts.
type member struct {
	key string
	at  int
}

// value checks the value at data[i] against t; t nil means "no struct
// here" (only the case-fold rule). path names where it is, for messages.
func (w *keyWalker) value(i int, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)) {
		t = nil // decoded by its own rules
	}
	switch w.data[i] {
	case '{':
		return w.object(i, t, path)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for n, j := 0, w.space(i+1); w.data[j] != ']'; n++ {
			if err := w.value(j, elem, fmt.Sprintf("%s[%d]", path, n)); err != nil {
				return err
			}
			if j = w.space(w.skip(j)); w.data[j] == ',' {
				j = w.space(j + 1)
			}
		}
	}
	return nil
}

// object checks the object at data[i]: its keys in sorted order, as a
// map of them would be walked; a key given twice counts once, with its
// last value (as encoding/json decodes it).
func (w *keyWalker) object(i int, t reflect.Type, path string) error {
	var ms []member
	for j := w.space(i + 1); w.data[j] != '}'; {
		end := w.skip(j)
		k, err := w.key(j, end)
		if err != nil {
			return err
		}
		at := w.space(w.space(end) + 1) // past the colon
		ms = append(ms, member{key: k, at: at})
		if j = w.space(w.skip(at)); w.data[j] == ',' {
			j = w.space(j + 1)
		}
	}
	slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	ms = lastOfEach(ms)
	keys := make([]string, len(ms))
	for n, m := range ms {
		keys[n] = m.key
	}
	if err := foldDuplicates(keys, path); err != nil {
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
	for _, m := range ms {
		ft := elem
		if fields != nil {
			var ok bool
			if ft, ok = fields[m.key]; !ok {
				return fmt.Errorf("unknown key %q%s (want one of: %s; keys are case-sensitive)", m.key, at(path), strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
			}
		}
		if err := w.value(m.at, ft, child(path, m.key)); err != nil {
			return err
		}
	}
	return nil
}

// lastOfEach keeps the last of each run of members with the same key in
// ms, sorted stably by key.
func lastOfEach(ms []member) []member {
	out := ms[:0]
	for n, m := range ms {
		if n+1 < len(ms) && ms[n+1].key == m.key {
			continue
		}
		out = append(out, m)
	}
	return out
}

// key is the text of the JSON string data[i:end] (decoded as
// encoding/json does when it has escapes or bytes that are not UTF-8).
func (w *keyWalker) key(i, end int) (string, error) {
	raw := w.data[i:end]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var k string
	err := json.Unmarshal(raw, &k)
	return k, err
}

// space returns the index of the first byte at or after i that is not
// JSON white space.
func (w *keyWalker) space(i int) int {
	for i < len(w.data) && isSpace(w.data[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skip returns the index just past the value at data[i].
func (w *keyWalker) skip(i int) int {
	switch w.data[i] {
	case '"':
		for i++; w.data[i] != '"'; i++ {
			if w.data[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch w.data[i] {
			case '"':
				i = w.skip(i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(w.data) && !isSpace(w.data[i]) && w.data[i] != ',' && w.data[i] != ']' && w.data[i] != '}' {
		i++
	}
	return i
}

// foldDuplicates reports two of keys, which are sorted, that are equal
// under simple case folding.
func foldDuplicates(keys []string, path string) error {
	seen := make(map[string]string, len(keys))
	for _, k := range keys {
		f := policy.FoldKey(k)
		if prev, dup := seen[f]; dup {
			return fmt.Errorf("keys %q and %q%s differ only in case", prev, k, at(path))
		}
		seen[f] = k
	}
	return nil
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
