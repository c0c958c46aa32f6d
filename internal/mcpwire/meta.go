package mcpwire

import (
	"bytes"
	"encoding/json"
)

// Meta is the metadata a 2026-era request carries in params._meta
// (basic/index.mdx, "Per-request protocol fields").
type Meta struct {
	// ProtocolVersion is io.modelcontextprotocol/protocolVersion (required).
	ProtocolVersion string
	// Capabilities is io.modelcontextprotocol/clientCapabilities (required).
	Capabilities ClientCapabilities
	// ClientInfo is io.modelcontextprotocol/clientInfo as sent; nil when
	// absent (it is a SHOULD).
	ClientInfo json.RawMessage
	// LogLevel is io.modelcontextprotocol/logLevel: the lowest level of log
	// messages the client wants for this request; "" means none at all.
	LogLevel string
	// ProgressToken is progressToken as sent (a string or a number); nil
	// when the request did not opt into progress notifications.
	ProgressToken json.RawMessage
	// Keys is every _meta entry as received, so that entries toolgate does
	// not read itself (trace context, vendor keys) can be passed on.
	Keys map[string]json.RawMessage
}

// ClientCapabilities is what a client declares it supports, per request.
type ClientCapabilities struct {
	// Raw is the capabilities object as sent.
	Raw json.RawMessage
	// Roots: the client answers roots/list input requests.
	Roots bool
	// Sampling: sampling/createMessage input requests; SamplingTools: with
	// tools.
	Sampling, SamplingTools bool
	// ElicitationForm and ElicitationURL: elicitation/create input requests
	// in form and URL mode. An empty elicitation object means form mode
	// (the 2025-11-25 compatibility rule).
	ElicitationForm, ElicitationURL bool
	// Extensions are the declared extensions by identifier, with their
	// settings.
	Extensions map[string]json.RawMessage
}

// Has reports whether the client declared extension ext.
func (c ClientCapabilities) Has(ext string) bool {
	_, ok := c.Extensions[ext]
	return ok
}

// ParseClientCapabilities reads a client capabilities object.
func ParseClientCapabilities(raw json.RawMessage) (ClientCapabilities, error) {
	var v struct {
		Roots    json.RawMessage `json:"roots"`
		Sampling *struct {
			Tools json.RawMessage `json:"tools"`
		} `json:"sampling"`
		Elicitation *struct {
			Form json.RawMessage `json:"form"`
			URL  json.RawMessage `json:"url"`
		} `json:"elicitation"`
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return ClientCapabilities{}, err
	}
	c := ClientCapabilities{Raw: raw, Extensions: v.Extensions}
	c.Roots = present(v.Roots)
	if v.Sampling != nil {
		c.Sampling = true
		c.SamplingTools = present(v.Sampling.Tools)
	}
	if e := v.Elicitation; e != nil {
		c.ElicitationForm = present(e.Form) || !present(e.URL)
		c.ElicitationURL = present(e.URL)
	}
	return c, nil
}

// present reports whether a member was sent with a value other than null.
func present(raw json.RawMessage) bool {
	return raw != nil && !bytes.Equal(raw, []byte("null"))
}

// ParseMeta reads params._meta of a 2026-era request. A request without
// _meta, or without protocolVersion or clientCapabilities in it, is
// malformed: invalid params (which takes HTTP 400). So is a reserved key
// with a value of the wrong type.
func ParseMeta(params json.RawMessage) (Meta, *Error) {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return Meta{}, Errorf(CodeInvalidParams, "params: %v", err)
		}
	}
	if p.Meta == nil {
		return Meta{}, Errorf(CodeInvalidParams, "missing params._meta (2026-07-28 requests carry %s and %s in it)", MetaProtocolVersion, MetaClientCapabilities)
	}
	m := Meta{Keys: p.Meta}
	v, ok := p.Meta[MetaProtocolVersion]
	if !ok || json.Unmarshal(v, &m.ProtocolVersion) != nil || m.ProtocolVersion == "" {
		return Meta{}, Errorf(CodeInvalidParams, "missing or invalid _meta field %q", MetaProtocolVersion)
	}
	caps, ok := p.Meta[MetaClientCapabilities]
	if !ok || !isObject(caps) {
		return Meta{}, Errorf(CodeInvalidParams, "missing or invalid _meta field %q", MetaClientCapabilities)
	}
	c, err := ParseClientCapabilities(caps)
	if err != nil {
		return Meta{}, Errorf(CodeInvalidParams, "invalid _meta field %q: %v", MetaClientCapabilities, err)
	}
	m.Capabilities = c
	if ci, ok := p.Meta[MetaClientInfo]; ok && present(ci) {
		if !isObject(ci) {
			return Meta{}, Errorf(CodeInvalidParams, "invalid _meta field %q: want an object", MetaClientInfo)
		}
		m.ClientInfo = ci
	}
	if ll, ok := p.Meta[MetaLogLevel]; ok && present(ll) {
		if json.Unmarshal(ll, &m.LogLevel) != nil {
			return Meta{}, Errorf(CodeInvalidParams, "invalid _meta field %q: want a string", MetaLogLevel)
		}
	}
	if pt, ok := p.Meta[MetaProgressToken]; ok && present(pt) {
		if !validID(pt) {
			return Meta{}, Errorf(CodeInvalidParams, "invalid _meta field %q: want a string or a number", MetaProgressToken)
		}
		m.ProgressToken = pt
	}
	return m, nil
}

func isObject(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{'
}

// logRanks orders MCP logging levels (RFC 5424 severities), least severe
// first.
var logRanks = map[string]int{
	"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7,
}

// LogWanted reports whether a log message at level goes to a request that
// asked for logs at min (Meta.LogLevel): never when min is "" (a 2026
// request gets log messages only when it asks), else when level is at
// least min. Unknown levels rank as info.
func LogWanted(min, level string) bool {
	if min == "" {
		return false
	}
	return rank(level) >= rank(min)
}

func rank(l string) int {
	if r, ok := logRanks[l]; ok {
		return r
	}
	return logRanks["info"]
}
