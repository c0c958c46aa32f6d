package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"toolgate/internal/policy"
)

// An Explainer explains how the deployment policy in force decides a call
// (POST /v1/policy/explain). cmd implements it over the policy.Holder, the
// configured agents (for the principal's groups) and the live catalog (for
// the tool's annotations, of trusted servers only). It must be safe for
// concurrent use. An error wrapping ErrExplainInput is the caller's (422).
type Explainer interface {
	Explain(ctx context.Context, req ExplainBody) (policy.Explanation, error)
}

// ErrExplainInput marks an explain request that cannot be answered as given.
var ErrExplainInput = errors.New("invalid explain request")

// ExplainBody is the body of POST /v1/policy/explain: the call to explain.
// Arguments is the call's arguments object (absent: {}). Principal is an
// agent id (its groups, tenant and on_behalf_of come from the config; an
// unknown id is explained with none); absent means no principal.
// Annotations, when given, replace the tool's declared annotations for a
// server marked trust_annotations (for a server that is not, annotations
// are unknown whatever is given). Tenant is not part of the body: the API
// sets it to the caller's tenant, and an Explainer explains an agent of
// another tenant as an unknown id, so that a tenant's principal learns
// nothing of another tenant's agents (issue 9 item 12).
type ExplainBody struct {
	Server      string              `json:"server"`
	Tool        string              `json:"tool"`
	Arguments   json.RawMessage     `json:"arguments,omitempty"`
	Principal   string              `json:"principal,omitempty"`
	Annotations *policy.Annotations `json:"annotations,omitempty"`
	Tenant      string              `json:"-"`
}

// explainPolicy answers POST /v1/policy/explain with a policy.Explanation.
func (s *Server) explainPolicy(w http.ResponseWriter, r *http.Request, c caller) error {
	var body ExplainBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	body.Tenant = c.principal.Tenant
	if body.Server == "" || body.Tool == "" {
		return invalid("server and tool are required")
	}
	// As a real tools/call: arguments, when present, must be an object
	// (MCP's CallToolRequest; the gateway answers anything else -32602 and
	// holds or runs nothing).
	if a := bytes.TrimLeft(body.Arguments, " \t\r\n"); len(body.Arguments) > 0 && (len(a) == 0 || a[0] != '{') {
		return invalid("arguments must be a JSON object, as in a tools/call")
	}
	x, err := s.explainer.Explain(r.Context(), body)
	if errors.Is(err, ErrExplainInput) {
		return invalid("%v", err)
	}
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, x)
	return nil
}
