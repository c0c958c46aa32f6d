package policy

import "testing"

// TestCommandCmd50Formatters (cmd50): formatters and fixers rewrite their
// file operands in place. On 3eefbceb an allow rule naming each tool
// allowed each bypass below (a rewrite of .git/config, a git hook, a
// Makefile, ~/.bashrc, or "." by a tool whose walk may enter .git), and a
// deny rule for "rm *" did not see the write.
func TestCommandCmd50Formatters(t *testing.T) {
	bypass := []string{
		`prettier --write .git/config`,
		`prettier -w .git/hooks/pre-commit`,
		`prettier --write ~/.bashrc`,
		`prettier --write Makefile`,
		`prettier --write ../other/x.js`,
		`prettier --write --with-node-modules .`,
		`npx prettier -w .git/hooks/pre-commit`,
		`gofmt -w .git/hooks/x`,
		`gofmt -w=true .git/hooks/x`,
		`goimports -w .git/hooks/x`,
		`black .git/hooks/pre-commit`,
		`black --exclude x .`,
		`python3 -m black .git/hooks/pre-commit`,
		`ruff format .git/hooks/x`,
		`ruff check --fix .git/hooks/x`,
		`ruff check .git/hooks/x`, // a configuration's fix = true
		`rustfmt .git/hooks/x`,
		`clang-format -i .git/hooks/x`,
		`eslint --fix .git/hooks/x`,
		`eslint --fix --no-ignore .`,
		`cargo fmt -- .git/hooks/x`,
		`cargo +nightly fmt -- .git/hooks/x`,
		`isort .git/hooks/x`,
		`shfmt -w .git/hooks/x`,
		`shfmt -w .`,
		`shfmt -l -w .`,
		`terraform fmt .git/hooks`,
		`yapf -i .git/hooks/x`,
		`autopep8 --in-place /etc/profile`,
	}
	fine := []string{
		`prettier --write src/app.ts`,
		`prettier --write .`,
		`prettier --check .git/config`,
		`npx prettier -w src/a.ts`,
		`gofmt -w .`,
		`gofmt -l .`,
		`gofmt -d .git/hooks/x`,
		`goimports -w internal`,
		`black src`,
		`black --check .git/hooks/x`,
		`ruff format .`,
		`ruff check .`,
		`ruff check --no-fix .git/hooks/x`,
		`rustfmt src/main.rs`,
		`clang-format -i src/a.c`,
		`clang-format .git/hooks/x`,
		`eslint src`,
		`eslint --fix src`,
		`eslint --fix .`,
		`cargo fmt`,
		`cargo fmt --check`,
		`isort .`,
		`isort --check-only .git/hooks/x`,
		`shfmt -w scripts/build.sh`,
		`shfmt -d .`,
		`terraform fmt`,
		`terraform fmt -recursive .`,
	}
	checkCommands(t, []string{"prettier *", "npx *", "gofmt *", "goimports *", "black *", "python3 *", "ruff *", "rustfmt *",
		"clang-format *", "eslint *", "cargo *", "isort *", "shfmt *", "terraform *", "yapf *", "autopep8 *"},
		bypass, fine, bypass, fine)
}

// TestCommandCmd50Plugins (cmd50): an option naming a local file or
// module the tool loads as code runs a program the matcher does not see.
// On 3eefbceb an allow rule naming the tool allowed each bypass below and
// a deny rule for "rm *" missed it.
func TestCommandCmd50Plugins(t *testing.T) {
	bypass := []string{
		`eslint -f ./x.js src`,
		`eslint --format=./x.js src`,
		`eslint -c x.js src`,
		`eslint --rulesdir rules src`,
		`eslint --plugin ./p.js src`,
		`npx eslint -f ./x.js src`,
		`vitest --reporter=./x.js`,
		`vitest run --reporter ./x.js`,
		`vitest run --setupFiles ./x.js`,
		`vitest -c evil.config.ts`,
		`jest --reporters ./x.js`,
		`jest --setupFiles ./x.js`,
		`jest --testEnvironment ./env.js`,
		`jest --config x.js`,
		`mocha --require ./x.js`,
		`mocha -r x`,
		`mocha --reporter ./r.js`,
		`prettier --plugin ./x.js --write src/a.ts`,
		`prettier --plugin=./x.mjs --check .`,
		`golangci-lint run -c x.yml`,
		`golangci-lint run --config=x.yml`,
		`golangci-lint custom`,
		`pytest -p mod`,
		`pytest -pmod`,
		`python3 -m pytest -p mod`,
		`pytest --confcutdir=..`,
		`pytest --rootdir ~/x`,
		`node -r ./x.js app.js`,
		`node --import=./x.mjs app.js`,
		`npx --package ./x eslint`,
		`npx -p ./x eslint src`,
		`npm exec --package=./x -- eslint`,
		`cargo run --manifest-path ~/x/Cargo.toml`,
		`cargo build --manifest-path=/srv/x/Cargo.toml`,
	}
	fine := []string{
		`eslint src`,
		`eslint -f json src`,
		`eslint --format stylish src`,
		`eslint --plugin react src`,
		`vitest run`,
		`vitest --reporter=dot`,
		`vitest run --reporter=verbose --environment jsdom`,
		`jest`,
		`jest --coverage`,
		`jest --testEnvironment node`,
		`mocha`,
		`mocha --reporter spec`,
		`prettier --plugin prettier-plugin-svelte --check .`,
		`golangci-lint run`,
		`golangci-lint run ./...`,
		`pytest -q`,
		`pytest -p no:cacheprovider`,
		`pytest --confcutdir=tests`,
		`node -r ts-node/register app.ts`,
		`node app.js -r ./x.js`,
		`npx eslint src`,
		`npx --package=typescript tsc --version`,
		`cargo run`,
		`cargo run --manifest-path crates/cli/Cargo.toml`,
	}
	checkCommands(t, []string{"eslint *", "npx *", "vitest *", "jest *", "mocha *", "prettier *", "golangci-lint *", "pytest *",
		"python3 *", "node *", "npm *", "cargo *", "tsc *"},
		bypass, fine, bypass, fine)
}
