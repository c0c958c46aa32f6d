package cli_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/api/apitest"
	"toolgate/internal/approval"
	"toolgate/internal/cli"
)

const (
	idPrompt   = "01900000-0000-7000-8000-0000000000a1"
	idResource = "01900000-0000-7000-8000-0000000000a2"
)

// TestListAndShowNameAPromptOrResource: a held prompts/get or
// resources/read is listed and shown with its server and the prompt or
// resource it reads. list printed "(prompt_get)" and an empty tool, and
// show "Kind: prompt_get" and an empty "Target:", so a reviewer could not
// tell which prompt of which server they were approving.
func TestListAndShowNameAPromptOrResource(t *testing.T) {
	fake := apitest.New(func() time.Time { return t0 })
	p := request(idPrompt)
	p.Kind, p.Server, p.Tool = approval.KindPromptGet, "ev", "args-prompt"
	p.Arguments = []byte(`{"city":"Oslo"}`)
	r := request(idResource)
	r.Kind, r.Server, r.Tool = approval.KindResourceRead, "docs", "file:///srv/secret.md"
	r.Arguments = []byte(`{"uri":"file:///srv/secret.md"}`)
	fake.Add(p)
	fake.Add(r)
	srv := httptest.NewServer(api.New(fake, authenticate, &api.Options{Now: func() time.Time { return t0 }}))
	t.Cleanup(srv.Close)
	e := &env{fake: fake, addr: srv.URL, vars: map[string]string{cli.EnvAddr: srv.URL, cli.EnvToken: tokAlic}}

	code, out, errs := e.run(t, "list")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errs)
	}
	for _, want := range []string{
		idPrompt + "  pending  ev      prompt args-prompt",
		idResource + "  pending  docs    resource file:///srv/secret.md",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("list output lacks %q:\n%s", want, out)
		}
	}
	for id, wants := range map[string][]string{
		idPrompt:   {"Kind:               prompt_get", "Server:             ev\n", "Prompt:             args-prompt\n"},
		idResource: {"Kind:               resource_read", "Server:             docs\n", "Resource:           file:///srv/secret.md\n"},
	} {
		code, out, errs := e.run(t, "show", id)
		if code != 0 {
			t.Fatalf("show %s: exit %d: %s", id, code, errs)
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("show %s lacks %q:\n%s", id, want, out)
			}
		}
		if strings.Contains(out, "Target:") {
			t.Errorf("show %s prints an empty Target:\n%s", id, out)
		}
	}
}
