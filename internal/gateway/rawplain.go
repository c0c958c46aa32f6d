package gateway

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// plainRawResult reports whether the raw tools/call result object raw
// (upstream.callRaw's, the upstream's server info dropped) is plain: valid
// UTF-8, with no members but content (a list of text items, each exactly
// {"type":"text","text":<string>}), structuredContent, isError (a boolean),
// _meta (an object or null) and resultType "complete" (a 2026-era
// upstream's; the answer adds its own). Then b is the result the SDK path writes
// for it before resultType: _meta (its entries, raw, and impl as the server
// info, keys sorted), content, structuredContent (omitted when null),
// isError (when true), as encoding/json writes them (compacted, HTML
// characters escaped); isError is its isError. Anything else (inputRequests,
// requestState, resultType, annotations or _meta on content, another content
// type, a member the SDK drops) is not plain: the SDK's decode may change it.
func plainRawResult(raw json.RawMessage, impl *mcp.Implementation) (b []byte, isError, plain bool) {
	var implJSON []byte
	if impl != nil {
		var err error
		if implJSON, err = json.Marshal(impl); err != nil {
			return plainRawResultDecode(raw, impl)
		}
	}
	return plainRawResultWith(raw, impl, implJSON)
}

// plainRawResultWith is plainRawResult with implJSON, impl as
// json.Marshal writes it (nil when impl is nil). The common shape is
// answered by scanPlainResult without a decode; anything it does not take
// (repeated or escaped keys, escaped text, a member that is not plain) by
// plainRawResultDecode.
func plainRawResultWith(raw json.RawMessage, impl *mcp.Implementation, implJSON []byte) (b []byte, isError, plain bool) {
	if impl == nil || implJSON != nil {
		if b, isError, ok := scanPlainResult(raw, implJSON); ok {
			return b, isError, true
		}
	}
	return plainRawResultDecode(raw, impl)
}

// metaEntry is one member of a plain result's _meta: the key with its
// quotes and the value, both as in the result.
type metaEntry struct{ key, val []byte }

// scanPlainResult is plainRawResult's answer for a plain result read by
// the scanner (rawscan.go): ok false when raw is not plain, or plain but
// in a form it leaves to the decode (a repeated or escaped key, a text
// with a \u escape, the server-info key in _meta, deep nesting). The
// bytes are the ones json.Marshal writes for plainRawResultDecode's value.
func scanPlainResult(raw []byte, implJSON []byte) (b []byte, isError, ok bool) {
	if !utf8.Valid(raw) {
		return nil, false, false
	}
	var content, sc, meta []byte
	var seen [fieldResultType + 1]bool
	m := scanMembers(raw, 0, true)
	for {
		k, esc, v, more := m.next()
		if !more {
			break
		}
		if esc {
			return nil, false, false
		}
		f, _ := resultField(k, false)
		if f == fieldOther || seen[f] {
			return nil, false, false
		}
		seen[f] = true
		switch f {
		case fieldContent:
			content = v
		case fieldStructuredContent:
			if string(v) != "null" {
				sc = v
			}
		case fieldIsError:
			switch string(v) {
			case "true":
				isError = true
			case "false":
			default:
				return nil, false, false
			}
		case fieldResultType:
			if string(v) != `"complete"` {
				return nil, false, false
			}
		case fieldMeta:
			if string(v) != "null" {
				if v[0] != '{' {
					return nil, false, false
				}
				meta = v
			}
		}
	}
	if m.bad || len(content) == 0 || content[0] != '[' {
		return nil, false, false
	}
	var buf [8]metaEntry
	es, ok := plainMetaEntries(buf[:0], meta)
	if !ok {
		return nil, false, false
	}
	out := make([]byte, 0, len(raw)+len(implJSON)+len(`{"_meta":{"`+mcp.MetaKeyServerInfo+`":},"content":,"structuredContent":,"isError":true}`)+8*len(`{"type":"text","text":}`))
	out = append(out, '{')
	if len(es) > 0 || implJSON != nil {
		out = append(out, `"_meta":{`...)
		infoDone := implJSON == nil
		n := 0
		for _, e := range es {
			if !infoDone && string(keyBytes(e.key)) > mcp.MetaKeyServerInfo {
				if n > 0 {
					out = append(out, ',')
				}
				out = appendServerInfo(out, implJSON)
				infoDone = true
				n++
			}
			if n > 0 {
				out = append(out, ',')
			}
			out = appendCompactHTML(out, e.key)
			out = append(out, ':')
			out = appendCompactHTML(out, e.val)
			n++
		}
		if !infoDone {
			if n > 0 {
				out = append(out, ',')
			}
			out = appendServerInfo(out, implJSON)
		}
		out = append(out, "},"...)
	}
	out = append(out, `"content":`...)
	if out, ok = appendPlainTextContent(out, content); !ok {
		return nil, false, false
	}
	if sc != nil {
		out = append(out, `,"structuredContent":`...)
		out = appendCompactHTML(out, sc)
	}
	if isError {
		out = append(out, `,"isError":true`...)
	}
	return append(out, '}'), isError, true
}

// appendServerInfo appends the _meta member naming the server, implJSON.
func appendServerInfo(out, implJSON []byte) []byte {
	out = append(out, `"`+mcp.MetaKeyServerInfo+`":`...)
	return append(out, implJSON...)
}

// plainMetaEntries appends the members of the _meta object meta (nil: no
// _meta) to es sorted by key, as encoding/json writes a map; ok false for
// a repeated or escaped key or the server-info key.
func plainMetaEntries(es []metaEntry, meta []byte) ([]metaEntry, bool) {
	if meta == nil {
		return es, true
	}
	m := scanMembers(meta, 1, false)
	for {
		k, esc, v, more := m.next()
		if !more {
			break
		}
		if esc || string(k[1:len(k)-1]) == mcp.MetaKeyServerInfo {
			return nil, false
		}
		// Insertion sort: a result's _meta has a few entries.
		i := len(es)
		es = append(es, metaEntry{})
		for i > 0 && bytes.Compare(keyBytes(es[i-1].key), keyBytes(k)) > 0 {
			es[i] = es[i-1]
			i--
		}
		if i > 0 && bytes.Equal(keyBytes(es[i-1].key), keyBytes(k)) {
			return nil, false
		}
		es[i] = metaEntry{key: k, val: v}
	}
	return es, !m.bad
}

// appendPlainTextContent appends the content list v as the SDK path
// writes it when each item is exactly {"type":"text","text":<string>}
// (keys in any order, not repeated or escaped): each item
// {"type":"text","text":...}, a text with a \u escape re-encoded (a lone
// surrogate becomes U+FFFD, as the SDK's decode makes it; see
// plainTextContent); ok false for anything else.
func appendPlainTextContent(out, v []byte) ([]byte, bool) {
	out = append(out, '[')
	e := scanElements(v, 1)
	for {
		it, more := e.next()
		if !more {
			break
		}
		var typ, text []byte
		m := scanMembers(it, 2, false)
		for {
			k, esc, val, more := m.next()
			if !more {
				break
			}
			if esc {
				return nil, false
			}
			switch string(k[1 : len(k)-1]) {
			case "type":
				if typ != nil {
					return nil, false
				}
				typ = val
			case "text":
				if text != nil {
					return nil, false
				}
				text = val
			default:
				return nil, false
			}
		}
		if m.bad || string(typ) != `"text"` || len(text) == 0 || text[0] != '"' {
			return nil, false
		}
		var ok bool
		if text, ok = textAsSDK(text); !ok {
			return nil, false
		}
		if e.n > 1 {
			out = append(out, ',')
		}
		out = append(out, `{"type":"text","text":`...)
		out = appendCompactHTML(out, text)
		out = append(out, '}')
	}
	if e.bad {
		return nil, false
	}
	return append(out, ']'), true
}

// keyBytes is the key k without its quotes.
func keyBytes(k []byte) []byte { return k[1 : len(k)-1] }
