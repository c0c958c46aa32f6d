package gateway

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sdkModule is the module whose server's methods knownMethods copies.
const sdkModule = "github.com/modelcontextprotocol/go-sdk"

// TestKnownMethodsAreTheSDKs (fixes36): knownMethods is exactly the set
// of methods the go-sdk's server dispatches (the keys of its
// serverMethodInfos), read from the source of the SDK version this module
// builds with. An SDK upgrade that serves a new method (or drops one)
// fails here, instead of refuseUnknownMethod answering the new method
// "Method not found" before the SDK could serve it. The keys are constant
// names of the mcp package or string literals; anything else (the map
// built another way) fails too, so that the check cannot pass by reading
// nothing.
func TestKnownMethodsAreTheSDKs(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", sdkModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", sdkModule, err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "mcp")
	served, err := sdkServerMethods(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(served) < 10 {
		t.Fatalf("read only %d methods from %s: %v", len(served), dir, served)
	}
	for _, m := range served {
		if !knownMethods[m] {
			t.Errorf("the SDK serves %q, which knownMethods lacks: refuseUnknownMethod would refuse it", m)
		}
	}
	for m := range knownMethods {
		if !slices.Contains(served, m) {
			t.Errorf("knownMethods has %q, which the SDK does not serve", m)
		}
	}
}

// sdkServerMethods returns the keys of serverMethodInfos in the Go files
// (tests aside) of the SDK's mcp package in dir, sorted.
func sdkServerMethods(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	consts := map[string]string{}
	var infos *ast.CompositeLit
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range gd.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, id := range vs.Names {
					if i >= len(vs.Values) {
						break
					}
					switch v := vs.Values[i].(type) {
					case *ast.BasicLit:
						if gd.Tok == token.CONST && v.Kind == token.STRING {
							consts[id.Name], _ = strconv.Unquote(v.Value)
						}
					case *ast.CompositeLit:
						if id.Name == "serverMethodInfos" {
							infos = v
						}
					}
				}
			}
		}
	}
	if infos == nil {
		return nil, fmt.Errorf("no serverMethodInfos map literal in %s", dir)
	}
	var methods []string
	for _, e := range infos.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			return nil, errKey(fset, e)
		}
		switch k := kv.Key.(type) {
		case *ast.Ident:
			m, ok := consts[k.Name]
			if !ok {
				return nil, errKey(fset, k)
			}
			methods = append(methods, m)
		case *ast.BasicLit:
			m, err := strconv.Unquote(k.Value)
			if err != nil {
				return nil, errKey(fset, k)
			}
			methods = append(methods, m)
		default:
			return nil, errKey(fset, k)
		}
	}
	slices.Sort(methods)
	return methods, nil
}

func errKey(fset *token.FileSet, n ast.Node) error {
	return fmt.Errorf("serverMethodInfos: a key that is not a string constant or literal at %s", fset.Position(n.Pos()))
}

// TestSDKServerMethodsReadsANewMethod: sdkServerMethods finds a method
// added to serverMethodInfos, by a constant declared in another file or
// a literal, so that TestKnownMethodsAreTheSDKs fails on an SDK that
// serves one more method; a key of another shape is an error.
func TestSDKServerMethodsReadsANewMethod(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("protocol.go", "package mcp\n\nconst (\n\tmethodPing = \"ping\"\n\tmethodNew = \"things/list\"\n)\n")
	write("server.go", "package mcp\n\nvar serverMethodInfos = map[string]methodInfo{\n\tmethodPing: {},\n\tmethodNew: {},\n\t\"other/x\": {},\n}\n")
	write("server_test.go", "package mcp\n\nconst methodNew = \"wrong\"\n")
	got, err := sdkServerMethods(dir)
	if err != nil || !slices.Equal(got, []string{"other/x", "ping", "things/list"}) {
		t.Fatalf("sdkServerMethods = %q, %v", got, err)
	}
	write("server.go", "package mcp\n\nvar serverMethodInfos = map[string]methodInfo{\n\tmethodPing: {},\n\tprefix + \"x\": {},\n}\n")
	if got, err := sdkServerMethods(dir); err == nil {
		t.Fatalf("sdkServerMethods = %q, want an error for a computed key", got)
	}
}
