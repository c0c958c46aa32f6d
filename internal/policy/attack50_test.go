package policy

import "testing"

// TestCommandAttack50FixerImports (attack50): isort -a and ruff check's
// required imports add a line of the caller's choosing to every Python
// file they rewrite; a walk of "." reaches the guarded noxfile.py, which
// nox (run later by a human) then runs. On 7daf4d7c an allow rule naming
// the tool allowed each bypass below and a deny rule for "rm *" missed
// it; writing the configuration files those tools read import lines
// from was allowed too.
func TestCommandAttack50FixerImports(t *testing.T) {
	bypass := []string{
		`isort -a 'import evil' .`,
		`isort --add-import 'import evil' .`,
		`isort --add-import='import evil' .`,
		`isort --add 'import evil' .`,
		`isort -a'import evil' src`,
		`isort -ca 'import evil' .`,
		`python3 -m isort -a 'import evil' .`,
		`isort --settings-path x.cfg .`,
		`isort --sp=conf/x.ini .`,
		`isort --settings-file x.toml .`,
		`ruff check --fix --select I002 --config 'lint.isort.required-imports=["import evil"]' .`,
		`ruff check --config 'lint.isort.required-imports=["import evil"]' .`,
		`ruff --config 'lint.isort.required-imports=["import evil"]' check --fix .`,
		`ruff check --fix --config=x.toml .`,
		`uv run ruff check --fix --config x.toml .`,
		`python3 -m ruff check --config x.toml .`,
		`printf 'fix = true\n' > ruff.toml`,
		`echo '[lint.isort]' > .ruff.toml`,
		`echo 'add_imports=import evil' > .isort.cfg`,
		`printf '[isort]\nadd_imports=import evil\n' > setup.cfg`,
		`echo x | tee sub/.editorconfig`,
		`cp x.cfg .isort.cfg`,
	}
	fine := []string{
		`isort .`,
		`isort src`,
		`isort --check-only -a 'import evil' .`,
		`isort --diff -a 'import evil' .`,
		`isort --sp . src`,
		`isort --profile black .`,
		`ruff check .`,
		`ruff check --fix src`,
		`ruff --config ruff.toml check --fix src`,
		`ruff --config pyproject.toml check --fix .`,
		`ruff check --no-fix --config 'lint.isort.required-imports=["import x"]' .`,
		`ruff check --diff --config x.toml .`,
		`ruff format --config 'line-length=100' .`,
		`cat ruff.toml setup.cfg .isort.cfg`,
		`black .`,
	}
	checkCommands(t, []string{"isort *", "python3 *", "ruff *", "uv *", "black *", "printf *", "echo *", "tee *", "cp *", "cat *"},
		bypass, fine, bypass, fine)
}

// TestCommandAttack50GoChdir (attack50): go's -C DIR moves every output
// under DIR; go build -C .git/hooks -o pre-commit ../../evil.go wrote an
// executable hook the next git commit ran (checked in a throwaway
// repository). On 7daf4d7c an allow rule "go *" allowed each bypass below
// and a deny rule for "rm *" missed it.
func TestCommandAttack50GoChdir(t *testing.T) {
	bypass := []string{
		`go build -C .git/hooks -o pre-commit ../../evil.go`,
		`go build -C .git -o hooks/pre-commit /w/evil.go`,
		`go build -C=.git/hooks -o pre-commit /w/evil.go`,
		`go build --C .git/hooks -o pre-commit /w/evil.go`,
		`go build -C ~/.local/bin -o git /w/evil.go`,
		`go build -C /usr/local/bin -o git /w/evil.go`,
		`go test -C ~/.local/bin -c -o git /w/x_test.go`,
		`go build -C .husky ../x`,
		`go build -C ~ -o .local/bin/git ./x`,
		`go build -C .venv/bin -o pytest /w/x.go`,
		`go test -C src -coverprofile=../.git/hooks/pre-commit ./...`,
		`go test -C src -outputdir=../.git/hooks ./...`,
		`go build -C src -o ../.husky/pre-commit .`,
	}
	fine := []string{
		`go build -C src ./...`,
		`go test -C src ./...`,
		`go build -C src -o bin/app .`,
		`go test -C src -coverprofile=cover.out ./...`,
		`go build -o bin/app ./cmd/app`,
		`go run ./cmd/a -v`,
	}
	checkCommands(t, []string{"go *"}, bypass, fine, bypass, fine)
}

// TestCommandAttack50TscProject (attack50): tsc reads where it writes
// (outDir, outFile, tsBuildInfoFile) from its project file; a
// tsconfig.json written by cp with "outDir": ".vscode" made tsc write
// .vscode/tasks.json and "tsBuildInfoFile": ".git/hooks/pre-commit" a
// hook (checked with TypeScript 5 in a throwaway repository). On
// 7daf4d7c an allow rule naming cp and tsc allowed each bypass below
// and a deny rule for "rm *" missed it.
func TestCommandAttack50TscProject(t *testing.T) {
	bypass := []string{
		`cp notes.txt tsconfig.json`,
		`cp a.json tsconfig.build.json`,
		`cp a.json web/jsconfig.json`,
		`mv a.json TSCONFIG.JSON`,
		`tsc -p x.json`,
		`tsc --project=x.json`,
		`tsc -p sub`,
		`npx tsc -p conf/x`,
		`tsc -b sub`,
		`tsc --build a/tsconfig.json b`,
	}
	fine := []string{
		`tsc`,
		`tsc -p .`,
		`tsc -p tsconfig.build.json`,
		`tsc -p ./tsconfig.json`,
		`tsc -b`,
		`tsc -b packages/a/tsconfig.json`,
		`npx tsc --noEmit`,
		`tsc src/a.ts`,
		`cat tsconfig.json`,
	}
	checkCommands(t, []string{"cp *", "mv *", "tsc *", "npx *", "cat *"}, bypass, fine, bypass, fine)
}

// TestCommandAttack50FoundSuffix (attack50): find -name '*.go' reads a
// found file as x.go, but {}.json names tsconfig.go.json for a found
// tsconfig.go, a project tsc -p accepts (a guarded name). On 7daf4d7c
// (where tsconfig names were not guarded) and before this fix each
// bypass below wrote one unseen.
func TestCommandAttack50FoundSuffix(t *testing.T) {
	bypass := []string{
		`find . -name '*.go' -exec cp x {}.json ';'`,
		`find src -iname '*.GO' -exec cp x {}.JSON ';'`,
		`find . -name '*.md' -print0 | xargs -0 -I{} cp x {}.json`,
	}
	fine := []string{
		`find . -name '*.go' -exec cp x {} ';'`,
		`find . -name '*.go' -exec cp {} {}.orig ';'`,
		`find . -name '*.md' -exec mv {} {}.bak ';'`,
		`find . -name '*.go' -exec sed -i s/a/b/ {} +`,
	}
	checkCommands(t, []string{"find *", "xargs *", "cp *", "mv *", "sed *"}, bypass, fine, bypass, fine)
}

// TestCommandAttack50PnpmConfigFlag (attack50): pnpm takes any setting
// as --config.KEY=VALUE; pnpm test --config.script-shell=./x.sh ran
// ./x.sh as the scripts' shell (checked with pnpm 9). On 7daf4d7c an
// allow rule "pnpm *" allowed each bypass below and a deny rule for
// "rm *" missed it.
func TestCommandAttack50PnpmConfigFlag(t *testing.T) {
	bypass := []string{
		`pnpm test --config.script-shell=./x.sh`,
		`pnpm run build --config.node-options=--require=./x.js`,
		`pnpm test --CONFIG.SCRIPT_SHELL=./x`,
		`pnpm --config.userconfig=./x.npmrc install`,
		`npm test --config.script-shell=./x`,
	}
	fine := []string{
		`pnpm test`,
		`pnpm test --config.shell-emulator=true`,
		`pnpm run build --filter web`,
	}
	checkCommands(t, []string{"pnpm *", "npm *"}, bypass, fine, bypass, fine)
}

// TestCommandAttack50Reports (attack50): report, cache and profile
// options write a file or directory (vitest empties its coverage
// directory first), and pytest -o addopts=… passes options the matcher
// does not read. On 7daf4d7c an allow rule naming the tool allowed each
// bypass below and a deny rule for "rm *" missed it.
func TestCommandAttack50Reports(t *testing.T) {
	bypass := []string{
		`jest --coverageDirectory=.git/hooks`,
		`npx jest --coverage-directory .husky`,
		`jest --cacheDirectory ~/.config/autostart`,
		`vitest --coverage.reportsDirectory=.git`,
		`npx vitest run --coverage.enabled --coverage.reportsDirectory .git`,
		`tsc --generateCpuProfile .git/hooks/pre-commit`,
		`golangci-lint run --out-format=json:.git/hooks/x`,
		`golangci-lint run --out-format=colored-line-number,json:Makefile`,
		`eslint --cache --cache-location .git/hooks/pre-commit src`,
		`prettier --check --cache --cache-location=.envrc src`,
		`pytest -o addopts='--pastebin=all'`,
		`pytest --override-ini=addopts=-pevil`,
		`python3 -m pytest -o 'addopts=--basetemp=.git'`,
		`uv run pytest -oaddopts=-pevil`,
	}
	fine := []string{
		`pytest -o cache_dir=.cache`,
		`pytest -q -x`,
		`jest --coverageDirectory=coverage`,
		`vitest run --coverage.reportsDirectory=coverage`,
		`eslint --cache --cache-location .eslintcache src`,
		`golangci-lint run --out-format=json:report.json`,
		`tsc --generateCpuProfile prof.cpuprofile`,
	}
	checkCommands(t, []string{"jest *", "npx *", "vitest *", "tsc *", "golangci-lint *", "eslint *", "prettier *", "pytest *",
		"python3 *", "uv *"}, bypass, fine, bypass, fine)
}

// TestCommandAttack50VitestPrograms (attack50): vitest runs the program
// --typecheck.checker names and loads a coverage reporter module from a
// path, as --reporter ./x.js (refused since cmd50). On 7daf4d7c an allow
// rule "vitest *" allowed each bypass below.
func TestCommandAttack50VitestPrograms(t *testing.T) {
	bypass := []string{
		`vitest run --typecheck.checker=./x`,
		`vitest --typecheck --typecheck.checker ./bin/x.sh`,
		`vitest run --coverage.enabled --coverage.reporter=./r.js`,
	}
	fine := []string{
		`vitest run --typecheck.checker=vue-tsc`,
		`vitest run --coverage.enabled --coverage.reporter=lcov`,
	}
	checkCommands(t, []string{"vitest *"}, bypass, fine, bypass, fine)
}
