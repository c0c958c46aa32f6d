package policy

import "testing"

// TestCommandAttack49BuildOptions (attack49): options of the build and
// test tools examples/build-agent.yaml allows that write a guarded file,
// run a program the matcher does not see or send data out. On 28089b9d a
// deny rule for "rm *" and an allow rule for each program allowed them
// (go build '-ldflags=-linkmode=external -extld=./x' runs ./x; sed -f
// x.sed runs x.sed's e command: both checked by hand).
func TestCommandAttack49BuildOptions(t *testing.T) {
	allow := []string{"pytest *", "python3 -m pytest *", "uv run pytest *", "mypy *", "cargo build *", "go build *", "go test *",
		"sed *", "gcc *", "clang *", "tsc *", "npx tsc *", "gofmt *", "staticcheck *",
		"golangci-lint *"}
	bypass := []string{
		`pytest --junitxml=.git/hooks/pre-commit`,
		`pytest --junit-xml .git/hooks/pre-commit`,
		`pytest --basetemp=.git`,
		`pytest --basetemp ~`,
		`pytest --pastebin=all`,
		`pytest --past=failed`,
		`pytest --cov-report=xml:.git/hooks/pre-commit`,
		`pytest -o cache_dir=.git/hooks`,
		`pytest --override-ini cache_dir=.git/hooks`,
		`pytest --override-ini=cache_dir=.git/hooks`,
		`python3 -m pytest --junitxml=.git/hooks/pre-commit`,
		`uv run pytest --junitxml=.git/hooks/pre-commit`,
		`mypy --python-executable ./x .`,
		`mypy --python-executable=./x .`,
		`mypy --install-types --non-interactive .`,
		`mypy --junit-xml .git/hooks/pre-commit .`,
		`mypy --html-report .git .`,
		`cargo build --target-dir .git`,
		`cargo build --target-dir=.git/hooks`,
		`cargo build -Zunstable-options --artifact-dir .git/hooks`,
		`go build -ldflags=-extld=./x ./...`,
		`go build '-ldflags=-linkmode=external -extld=./x' ./...`,
		`go test -ldflags -extldflags=-B./x ./...`,
		`go build -compiler=gccgo -gccgoflags=-wrapper,./x ./...`,
		`sed -f x.sed a`,
		`sed -nf x.sed a`,
		`sed --file=x.sed a`,
		`sed --fi x.sed a`,
		`gcc --config=x.cfg a.c`,
		`npx tsc --outFile .git/hooks/pre-commit`,
		`go test -coverprofile=Makefile ./...`,
		`go test -cpuprofile .git/hooks/pre-commit ./x`,
		`go test -outputdir .git/hooks ./x`,
		`gofmt -cpuprofile .git/hooks/pre-commit x.go`,
		`staticcheck -debug.memprofile=Makefile ./...`,
		`golangci-lint run --cpu-profile-path .git/hooks/pre-commit`,
		`tsc --outDir .git/hooks`,
		`tsc -outdir=.git/hooks`,
		`tsc --generateTrace .git`,
		`tsc --tsBuildInfoFile Makefile`,
		`clang --config=x.cfg a.c`,
		`clang --config x.cfg a.c`,
	}
	fine := []string{`pytest`, `pytest -x -q tests/`, `pytest --junitxml=build/report.xml`, `pytest --basetemp=build/tmp`,
		`python3 -m pytest -k foo`, `uv run pytest -x`, `mypy --strict src`, `mypy --cache-dir build/mypy .`,
		`cargo build --release`, `cargo build --target-dir target/x`, `go build -ldflags=-s ./...`, `go build -ldflags='-s -w' ./...`,
		`sed -n 1,5p a`, `sed -e s/a/b/ a`, `sed -E 's/f/g/' a`,
		`gcc -O2 -c a.c`, `clang -o build/a a.c`,
		`tsc --outDir dist`, `go test -coverprofile=cover.out ./...`, `gofmt -l .`, `staticcheck ./...`,
		`golangci-lint run ./...`, `npx tsc -p tsconfig.json --noEmit`}
	checkCommands(t, allow, bypass, fine, bypass, fine)
}

// TestCommandAttack49Files (attack49): files a later plain call or a
// human's tools run, which cp and mv wrote at once on 28089b9d: VS Code's
// tasks (runOn: folderOpen), a devcontainer's postCreateCommand,
// JetBrains' run configurations, and the locked dependencies npm ci, uv
// sync and pip install -r install (a resolved URL of the writer's
// choosing).
func TestCommandAttack49Files(t *testing.T) {
	allow := []string{"cp [^\\-]* [^\\-]*", "mv [^\\-]* [^\\-]*", "cp -r [^\\-]* [^\\-]*"}
	bypass := []string{
		`cp x .vscode/tasks.json`,
		`mv x .vscode/settings.json`,
		`cp -r x .vscode`,
		`cp x .devcontainer/devcontainer.json`,
		`cp x .devcontainer.json`,
		`cp x .idea/workspace.xml`,
		`cp x package-lock.json`,
		`cp x web/npm-shrinkwrap.json`,
		`cp x pnpm-lock.yaml`,
		`mv x uv.lock`,
		`cp x requirements.txt`,
		`cp x requirements-dev.txt`,
		`cp x REQUIREMENTS.TXT`,
	}
	fine := []string{`cp a.txt b.txt`, `mv src/a.go src/b.go`, `cp -r docs out`, `cp package.json.bak notes/pkg.json`,
		`cp lock.txt build/lock.txt`}
	checkCommands(t, allow, bypass, fine, bypass, fine)
}

// TestCommandAttack49Secrets (attack49): programs that print the shell
// server's environment (its tokens). On 28089b9d an allow rule for each
// program and a deny rule for "rm *" allowed them.
func TestCommandAttack49Secrets(t *testing.T) {
	allow := []string{"jq *", "make", "make *", "npm run *", "pnpm run *", "cmake *", "cat *", "grep *"}
	bypass := []string{
		`jq -n env`,
		`jq -n '[env.HOME]'`,
		`jq -n 'env|keys'`,
		`jq -f x.jq a.json`,
		`jq -L . 'import "x" as x; x::f' a.json`,
		`make -p`,
		`make -pn`,
		`make -np`,
		`make --print-data-base`,
		`make --print-d`,
		`make -f Makefile -p`,
		`npm run env`,
		`npm run --silent env`,
		`pnpm run env`,
		`cmake -E environment`,
		`cat /proc/self/environ`,
		`cat /proc/self/envir''on`,
		`grep -a TOKEN /proc/1/environ`,
	}
	fine := []string{`jq .env x.json`, `jq '.a.env' x.json`, `jq -r '.name' package.json`, `make`, `make -j4`, `make -C build test`,
		`make -k`, `npm run build`, `npm run test -- --env=x`, `cmake -E echo hi`, `cat .env.example`, `grep -r env src`}
	checkCommands(t, allow, bypass, fine, bypass, fine)
}
