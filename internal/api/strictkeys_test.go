package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"toolgate/internal/session"
)

func TestCheckKeys(t *testing.T) {
	tests := []struct {
		name string
		body string
		into any
		want string // "" for no error
	}{
		{name: "exact", body: `{"reason":"x","arguments_hash":"h"}`, into: &ApproveBody{}},
		{name: "case duplicate", body: `{"reason":"a","REASON":"b"}`, into: &DenyBody{}, want: `keys "REASON" and "reason" differ only in case`},
		{name: "field in another case", body: `{"Reason":"a"}`, into: &DenyBody{}, want: `unknown key "Reason" (want one of: reason`},
		{name: "unknown", body: `{"force":true}`, into: &ApproveBody{}, want: `unknown key "force"`},
		{name: "Kelvin sign folds to k", body: `{"k":1,"\u212a":2}`, into: &json.RawMessage{}, want: "differ only in case"},
		{name: "nested map keys", body: `{"require_approval":{"fs":true,"FS":false}}`, into: &CreateSessionBody{}, want: `keys "FS" and "fs" in require_approval differ only in case`},
		{name: "nested distinct", body: `{"tools":["a"],"require_approval":{"fs":true,"gh":["x"]}}`, into: &CreateSessionBody{}},
		{name: "policy request", body: `{"Tools":["a"]}`, into: &session.Change{}, want: `unknown key "Tools"`},
		{name: "raw policy keeps its own rules", body: `{"base_revision":1,"policy":{"default":"deny","rules":[]}}`, into: &ProposeBody{}},
		{name: "raw policy case duplicate", body: `{"base_revision":1,"policy":{"default":"deny","Default":"allow"}}`, into: &ProposeBody{}, want: `keys "Default" and "default" in policy differ only in case`},
		{name: "in an array", body: `[{"a":1,"A":2}]`, into: &json.RawMessage{}, want: `keys "A" and "a" in [0] differ only in case`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkKeys([]byte(tt.body), reflect.TypeOf(tt.into))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("checkKeys = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("checkKeys = %v, want %q", err, tt.want)
			}
		})
	}
}
