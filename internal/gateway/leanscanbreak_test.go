package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

// Attacks on the lean front's request scanner (leanscan.go, breakheld):
// bodies around the keys the decode folds (Unicode's simple folding and
// encoding/json's own), escapes, invalid UTF-8, NUL, a BOM, numbers as
// ids, deep and huge values. Whenever the scanner answers, its answer must
// be json.Unmarshal's (checkLeanRequest): the name and arguments the gate
// and the policy see are the ones the upstream is sent.
var leanScanAttackSeeds = []string{
	// Kelvin sign and long s inside keys the decode folds.
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","tasK":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","argumentſ":{"b":2},"arguments":{"a":1}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1},"argumentſ":{"b":2}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","inputReſponſeſ":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","requeſtState":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_META":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","paramſ":{"name":"other"},"params":{"name":"echo"}}`,
	// Dotted and dotless i: encoding/json's fold is ToUpper(ToLower(r)).
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"İd":2}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"ıd":2}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","ınputResponses":{}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","İnputResponses":{}}}`,
	// Escapes in names, keys and values.
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo\u0000"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"na\u006de":"other","name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ec\ud800ho"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"p":"\ud800"}}}`,
	// Invalid UTF-8, NUL, BOM.
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"p\":\"\xff\xfe\"}}}",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"na\xffme\":\"x\",\"name\":\"echo\"}}",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}\x00",
	"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"ec\x00ho\"}}",
	// Numbers as ids.
	`{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1e400,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":1.,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":+1,"method":"tools/call","params":{"name":"echo"}}`,
	`{"jsonrpc":"2.0","id":[1],"method":"tools/call","params":{"name":"echo"}}`,
	// Whitespace JSON does not allow, and does.
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}\v}",
	"{\"jsonrpc\"\t:\r\"2.0\"\n,\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}\u00a0}",
}

func TestScanLeanRequestAttacks(t *testing.T) {
	for _, s := range leanScanAttackSeeds {
		checkLeanRequest(t, []byte(s))
	}
	// Deep and huge: past the scanner's depth it falls back to the decode.
	for _, depth := range []int{maxScanDepth - 2, maxScanDepth, maxScanDepth + 2, 5000} {
		args := `{"a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
		checkLeanRequest(t, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":`+args+`}}`))
	}
	huge := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"p":"` + strings.Repeat("x", 4<<20) + `"}}}`
	checkLeanRequest(t, []byte(huge))
}

// FuzzScanLeanRequestKeys builds tools/call bodies from fuzzed member
// names and values around the ones the scanner reads, so the fuzzer
// explores key folding, duplicates and escapes without first having to
// find the whole shape.
func FuzzScanLeanRequestKeys(f *testing.F) {
	f.Add("name", "arguments", "id", `"echo"`, `{"a":1}`, `2`)
	f.Add("name", "argumentſ", "İd", `"echo"`, `{"a":1}`, `2`)
	f.Add("tasK", "Name", "ID", `"x"`, `null`, `"y"`)
	f.Add("na\\u006de", "arguments", "paramſ", `"\u0065cho"`, `{"a":"\ud800"}`, `{}`)
	f.Add("name", "name", "method", `"echo"`, `"other"`, `"tools/list"`)
	f.Fuzz(func(t *testing.T, k1, k2, k3, v1, v2, v3 string) {
		for _, k := range []string{k1, k2, k3} {
			if !json.Valid([]byte(`"` + k + `"`)) {
				return
			}
		}
		bodies := []string{
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"` + k1 + `":` + v1 + `,"` + k2 + `":` + v2 + `},"` + k3 + `":` + v3 + `}`,
			`{"` + k3 + `":` + v3 + `,"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","` + k1 + `":` + v1 + `,"arguments":{},"` + k2 + `":` + v2 + `}}`,
		}
		for _, b := range bodies {
			checkLeanRequest(t, []byte(b))
		}
	})
}
