package gateway

import (
	"encoding/json"
	"reflect"
	"testing"
)

// leanRequestSeeds are POST bodies around the shape scanLeanRequest reads.
var leanRequestSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
	` {"jsonrpc" : "2.0", "id" : "a-1", "method":"tools/call", "params":{"arguments":{"m":[1,2,{"x":null}]},"name":"echo"}} ` + "\n",
	`{"id":7,"params":{"name":"echo"},"method":"tools/call","jsonrpc":"2.0"}`,
	`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo","arguments":null}}`,
	`{"jsonrpc":"2.0","id":1.5e3,"method":"tools/call","params":{"name":"echo","arguments":{}},"extra":[true,false]}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","other":1}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`,
	`{"jsonrpc":2,"id":1,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":null,"id":1,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ec\u0068o"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"échø"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e` + "\xff" + `"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","task":null}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","inputResponses":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","requestState":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","Name":"other"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","ARGUMENTS":{}}}`,
	`{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1,"Method":"tools/list","method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"params":{"name":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"arguments":{"a":1}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"ſname":"echo"}}`,
	`{"jſonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"\u006eame":"echo"}}`,
	`{"\u0069d":1,"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1,}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}} x`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}`,
	`{"jsonrpc":"2.0","id":01,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":"` + "\x01" + `","method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":"<&>\u2028"}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}]`,
	`{}`,
	`null`,
	``,
}

// checkLeanRequest fails t when scanLeanRequest answers body differently
// from json.Unmarshal into a leanRequest.
func checkLeanRequest(t *testing.T, body []byte) {
	t.Helper()
	got, ok := scanLeanRequest(body)
	if !ok {
		return
	}
	var want leanRequest
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("scanned %q, which the decode refuses: %v", body, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: scanned %+v (params %+v), decoded %+v (params %+v)", body, got, got.Params, want, want.Params)
	}
}

// TestScanLeanRequestIsTheDecode: whenever the scanner answers, its
// leanRequest is json.Unmarshal's; and it answers the plain calls.
func TestScanLeanRequestIsTheDecode(t *testing.T) {
	for _, s := range leanRequestSeeds {
		checkLeanRequest(t, []byte(s))
	}
	for _, s := range leanRequestSeeds[:6] {
		if _, ok := scanLeanRequest([]byte(s)); !ok {
			t.Errorf("%s: not scanned", s)
		}
	}
}

// FuzzScanLeanRequest is TestScanLeanRequestIsTheDecode on generated bodies.
func FuzzScanLeanRequest(f *testing.F) {
	for _, s := range leanRequestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkLeanRequest(t, body)
	})
}

// TestDecodeLeanRequestScansTheEchoCall: the perf harness's call is
// decoded in 4 allocations (params, id, arguments, name); the reflective
// decode it replaces made 8.
func TestDecodeLeanRequestScansTheEchoCall(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"message":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}}`)
	n := testing.AllocsPerRun(100, func() {
		if _, err := decodeLeanRequest(body); err != nil {
			t.Fatal(err)
		}
	})
	if n > 4 {
		t.Fatalf("%v allocations per decode, want ≤ 4", n)
	}
}
