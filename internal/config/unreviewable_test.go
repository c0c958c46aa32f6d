package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnreviewable(t *testing.T) {
	const base = `
servers: {pay: {url: "http://127.0.0.1:9/mcp"}}
policy:
  default: approve
  rules:
    - {name: two, server: pay, effect: approve, approval: {approvers: ["group:ops"]}}
    - {name: reads, server: pay, tools: ["get_*"], effect: allow}
`
	tests := []struct {
		name      string
		approvers string
		extra     []Approver
		want      []string
	}{
		{name: "no approvers at all", want: []string{"policy.default (approve)", `policy.rules[0] "two"`}},
		{name: "viewer only", approvers: `approvers: [{id: v, token_env: T, roles: [viewer], groups: [ops]}]`,
			want: []string{"policy.default (approve)", `policy.rules[0] "two"`}},
		{name: "approver outside the group", approvers: `approvers: [{id: a, token_env: T, roles: [approver]}]`,
			want: []string{`policy.rules[0] "two"`}},
		{name: "approver in the group", approvers: `approvers: [{id: a, token_env: T, roles: [approver], groups: [ops]}]`},
		{name: "dev admin covers the default only", extra: []Approver{{ID: "dev", Roles: []string{RoleAdmin}}},
			want: []string{`policy.rules[0] "two"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(strings.NewReader(base+tt.approvers), MapEnv(nil))
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Unreviewable(tt.extra...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Unreviewable (-want +got):\n%s", diff)
			}
		})
	}
}
