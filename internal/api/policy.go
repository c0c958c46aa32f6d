package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/policystore"
	"toolgate/internal/store"
)

// Policies is what the API needs for the store-backed deployment policy
// (policy.source: store). *policystore.Service implements it.
type Policies interface {
	// Propose proposes p as the successor of revision base (see
	// policystore.Service.Propose).
	Propose(ctx context.Context, proposer approval.Principal, base int64, p *policy.Policy) (policystore.Outcome, error)
	// Apply applies an approved policy_change approval exactly once.
	Apply(ctx context.Context, id approval.ID, actor string) (store.PolicyRevision, error)
	// Get returns revision n, the current one when n is 0.
	Get(ctx context.Context, n int64) (store.PolicyRevision, error)
	// Diff summarises the change from revision from to revision to.
	Diff(ctx context.Context, from, to int64) ([]string, error)
}

// Error codes of the policy routes.
const (
	CodeNotApproved = "not_approved" // 409: the proposal is not (or no longer) approved
	CodePolicyMoved = "policy_moved" // 409: the deployment policy is not at the base revision
)

// ProposeBody is the body of POST /v1/policy/proposals. Policy is the
// proposed policy: a JSON string holding YAML or JSON text, or a JSON
// object. BaseRevision is the revision it was made against (the current
// one, from GET /v1/policy).
type ProposeBody struct {
	BaseRevision int64           `json:"base_revision"`
	Policy       json.RawMessage `json:"policy"`
}

// ProposeResult answers POST /v1/policy/proposals: 201 with Applied and
// the new Revision when the change only narrows; 202 with the pending
// policy_change Approval and the Widens reasons otherwise. Diff
// summarises the change from the base revision.
type ProposeResult struct {
	Applied  bool                  `json:"applied"`
	Revision *store.PolicyRevision `json:"revision,omitempty"`
	Approval *Approval             `json:"approval,omitempty"`
	Widens   []string              `json:"widens,omitempty"`
	Diff     []string              `json:"diff"`
}

// PolicyDiff answers GET /v1/policy/diff.
type PolicyDiff struct {
	From int64    `json:"from"`
	To   int64    `json:"to"`
	Diff []string `json:"diff"`
}

// deploymentAdminOnly is the public message refusing a tenant's principal
// a change of the deployment policy.
const deploymentAdminOnly = "the deployment policy applies to every tenant: only an admin without a tenant (a deployment admin) may change it"

// requireDeployment refuses a caller with a tenant (403): the deployment
// policy governs every tenant, so a tenant's admin may not change it
// (issue 9 item 12). Reads stay open to every reader: each tenant is
// subject to the deployment policy.
func requireDeployment(c caller) error {
	if c.principal.Tenant != "" {
		return &apiError{Status: http.StatusForbidden, Code: CodeForbidden, Msg: deploymentAdminOnly}
	}
	return nil
}

// routePolicy mounts the policy routes: writes need the admin role and no
// tenant, reads any role that may read approvals (approvers review
// proposals).
func (s *Server) routePolicy() {
	admin := []string{RoleAdmin}
	s.mux.Handle("POST /v1/policy/proposals", s.handle(s.require(admin, s.proposePolicy)))
	s.mux.Handle("POST /v1/policy/proposals/{id}/apply", s.handle(s.require(admin, s.applyPolicy)))
	s.mux.Handle("GET /v1/policy", s.handle(s.require(readRoles, s.getPolicy)))
	s.mux.Handle("GET /v1/policy/diff", s.handle(s.require(readRoles, s.diffPolicy)))
}

func (s *Server) proposePolicy(w http.ResponseWriter, r *http.Request, c caller) error {
	if err := requireDeployment(c); err != nil {
		return err
	}
	var body ProposeBody
	if err := decodeBody(w, r, &body); err != nil {
		return err
	}
	if len(body.Policy) == 0 {
		return invalid("policy is required")
	}
	if body.BaseRevision < 1 {
		return invalid("base_revision %d: want the current revision (>= 1)", body.BaseRevision)
	}
	text := []byte(body.Policy)
	var str string
	if json.Unmarshal(body.Policy, &str) == nil {
		text = []byte(str)
	}
	p, err := policystore.Parse(text)
	if err != nil {
		return policyError(err)
	}
	out, err := s.policies.Propose(r.Context(), c.principal, body.BaseRevision, p)
	if err != nil {
		return policyError(err)
	}
	res := ProposeResult{Applied: out.Applied, Widens: out.Reasons, Diff: nonNil(out.Diff)}
	if out.Applied {
		res.Revision = &out.Revision
		s.writeJSON(w, r, http.StatusCreated, res)
		return nil
	}
	a := fromRequest(out.Approval)
	res.Approval = &a
	s.writeJSON(w, r, http.StatusAccepted, res)
	return nil
}

func (s *Server) applyPolicy(w http.ResponseWriter, r *http.Request, c caller) error {
	if err := requireDeployment(c); err != nil {
		return err
	}
	id, err := pathID(r)
	if err != nil {
		return err
	}
	rev, err := s.policies.Apply(r.Context(), id, c.principal.ID)
	if err != nil {
		return policyError(err)
	}
	s.writeJSON(w, r, http.StatusOK, rev)
	return nil
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request, _ caller) error {
	n, err := revisionParam(r, "revision", true)
	if err != nil {
		return err
	}
	rev, err := s.policies.Get(r.Context(), n)
	if err != nil {
		return policyError(err)
	}
	s.writeJSON(w, r, http.StatusOK, rev)
	return nil
}

func (s *Server) diffPolicy(w http.ResponseWriter, r *http.Request, _ caller) error {
	from, err := revisionParam(r, "from", false)
	if err != nil {
		return err
	}
	to, err := revisionParam(r, "to", false)
	if err != nil {
		return err
	}
	d, err := s.policies.Diff(r.Context(), from, to)
	if err != nil {
		return policyError(err)
	}
	s.writeJSON(w, r, http.StatusOK, PolicyDiff{From: from, To: to, Diff: nonNil(d)})
	return nil
}

// revisionParam reads a revision number (>= 1) from the query parameter
// name; when optional, an absent one is 0.
func revisionParam(r *http.Request, name string, optional bool) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" && optional {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, invalid("%s %q: want a revision number (>= 1)", name, v)
	}
	return n, nil
}

// applyApprovedPolicy applies got when the review just approved a
// policy_change approval, and returns the approval as it is after that
// (consumed, or invalidated when the policy moved). Failures are logged;
// the review itself stands, and POST /v1/policy/proposals/{id}/apply can
// be tried again.
func (s *Server) applyApprovedPolicy(ctx context.Context, c caller, got approval.Request) approval.Request {
	if s.policies == nil || got.Kind != approval.KindPolicyChange || got.State != approval.StateApproved {
		return got
	}
	if _, err := s.policies.Apply(ctx, got.ID, c.principal.ID); err != nil {
		s.log.WarnContext(ctx, "apply approved policy change", "approval", got.ID, keyErr, err)
	}
	if cur, err := s.approvals.Get(ctx, got.ID); err == nil {
		return cur
	}
	return got
}
