package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"toolgate/internal/config"
	"toolgate/internal/policy"
)

// toolsFlag collects the --tools SERVER=FILE flags of `policy check`.
type toolsFlag []string

func (f *toolsFlag) String() string { return strings.Join(*f, " ") }

func (f *toolsFlag) Set(v string) error {
	if s, file, ok := strings.Cut(v, "="); !ok || s == "" || file == "" {
		return errors.New("want SERVER=FILE")
	}
	*f = append(*f, v)
	return nil
}

// listedTool is one tool of a tools/list result, as far as check needs it:
// its input schema's top-level keywords.
type listedTool struct {
	Name        string                     `json:"name"`
	InputSchema map[string]json.RawMessage `json:"inputSchema"`
}

// openKeywords are the top-level JSON Schema keywords through which an
// input schema can declare or admit fields other than those of its
// properties: a schema with any of them does not say which fields are
// unknown.
var openKeywords = []string{"$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "not",
	"if", "then", "else", "dependentSchemas", "dependencies", "patternProperties", "propertyNames"}

// fields returns the names of the top-level properties t's input schema
// declares, and whether the schema says that they are all it has: it is
// a plain object schema (none of openKeywords) that lists properties or
// forbids others (additionalProperties false), and neither
// additionalProperties nor unevaluatedProperties admits more (absent or
// false). Otherwise (a $ref, allOf, anyOf…, additionalProperties true or
// a schema, no schema or a schema that is not an object) a field it does
// not list may still be one of the tool's.
func (t listedTool) fields() ([]string, bool) {
	var props map[string]json.RawMessage
	if raw, ok := t.InputSchema["properties"]; ok && json.Unmarshal(raw, &props) != nil {
		return nil, false
	}
	names := slices.Sorted(maps.Keys(props))
	for _, k := range openKeywords {
		if _, ok := t.InputSchema[k]; ok {
			return names, false
		}
	}
	// admits reports whether keyword k is there and not false: other
	// fields are admitted explicitly.
	admits := func(k string) bool {
		raw, ok := t.InputSchema[k]
		return ok && strings.TrimSpace(string(raw)) != "false"
	}
	if admits("additionalProperties") || admits("unevaluatedProperties") {
		return names, false
	}
	_, listed := t.InputSchema["properties"]
	_, forbids := t.InputSchema["additionalProperties"] // present and not admitting: false
	return names, listed || forbids
}

// readTools reads the --tools files: each the JSON of an upstream server's
// tools/list (its result {"tools": [...]}, the whole JSON-RPC response
// {"result": {"tools": [...]}}, or the bare array of tools), for the server
// of cfg named before the "=". The tools are those of the real server, by
// their real names, as rules name them.
func readTools(cfg config.Config, specs []string) ([]policy.ToolArgs, error) {
	var out []policy.ToolArgs
	for _, spec := range specs {
		server, file, _ := strings.Cut(spec, "=")
		if _, ok := cfg.Servers[server]; !ok {
			return nil, fmt.Errorf("--tools %s: server %q is not configured", spec, server)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--tools %s: %w", spec, err)
		}
		tools, err := decodeTools(data)
		if err != nil {
			return nil, fmt.Errorf("--tools %s: %w", spec, err)
		}
		for _, t := range tools {
			props, closed := t.fields()
			out = append(out, policy.ToolArgs{Server: server, Tool: t.Name, Properties: props, Open: !closed})
		}
	}
	return out, nil
}

func decodeTools(data []byte) ([]listedTool, error) {
	var list struct {
		Tools  []listedTool `json:"tools"`
		Result *struct {
			Tools []listedTool `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &list); err == nil {
		if list.Result != nil {
			return list.Result.Tools, nil
		}
		if list.Tools != nil {
			return list.Tools, nil
		}
	}
	var bare []listedTool
	if err := json.Unmarshal(data, &bare); err != nil {
		return nil, errors.New(`want the JSON of a tools/list result: {"tools": [...]}, the JSON-RPC response holding it, or the array of tools`)
	}
	return bare, nil
}
