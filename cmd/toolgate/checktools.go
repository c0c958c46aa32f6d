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

// listedTool is one tool of a tools/list result, as far as check needs it.
type listedTool struct {
	Name        string `json:"name"`
	InputSchema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	} `json:"inputSchema"`
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
			out = append(out, policy.ToolArgs{Server: server, Tool: t.Name, Properties: slices.Sorted(maps.Keys(t.InputSchema.Properties))})
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
