// summarize.mjs reads one run of `conformance server` (its stdout log and its --output-dir) and
// compares the per-scenario outcome with a baseline of known failures.
//
// Usage: node summarize.mjs --log FILE --results DIR --baseline FILE [--expect N] [--label TEXT]
//                            [--requirements FILE] [--known-gaps FILE]
//
// --expect N fails the run unless exactly N scenarios ran (the pinned suite's count for the spec
// version), so a suite that silently runs fewer scenarios cannot pass. --label names the run in
// the last line.
//
// --requirements FILE is the requirement set a `--requirements REV` run used
// (requirements/REV.yaml of the suite): only the scenarios of its `server:` list are scored and
// counted by --expect; the others it ran (its not_scored entries: extensions, pending) are
// reported on a line of their own, "unscored: N passed, N failed", and never fail the run.
//
// --known-gaps FILE lists, in the baseline's format, scenarios that fail because toolgate lacks a
// feature (not because no proxy could pass them). They are not accepted: each one that fails is
// counted as failed, printed as GAP, and named on a line of its own, "known gaps (non-gating): N
// failing: ..."; only the exit status ignores them. run.sh passes it for the 2026-07-28 runs only,
// so the 2025 runs stay fully gating. A known gap that passes is reported so the list shrinks.
//
// A scenario fails when any of its checks has status FAILURE or WARNING (the same rule as the
// conformance tool's own --expected-failures), or when it left no checks.json (it threw).
// The baseline has one known-failing scenario per line, "name # reason"; blank lines and lines
// starting with "#" are comments. Every entry needs a reason.
//
// Exit status: 0 when every failing scenario is in the baseline; 1 on a failure outside the
// baseline, an incomplete run, or a malformed baseline. Baseline entries that now pass are
// printed as a hint to shrink the baseline, and do not fail the run.
// The last line printed is "LABEL: N passed, N failed" (LABEL defaults to "conformance").

import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    log: { type: 'string' },
    results: { type: 'string' },
    baseline: { type: 'string' },
    expect: { type: 'string' },
    label: { type: 'string', default: 'conformance' },
    requirements: { type: 'string' },
    'known-gaps': { type: 'string' },
  },
});
for (const k of ['log', 'results', 'baseline']) {
  if (!args[k]) {
    console.error(`summarize.mjs: --${k} is required`);
    process.exit(2);
  }
}

// readBaseline returns a Map from scenario name to reason, or exits on a malformed line.
function readBaseline(path) {
  const baseline = new Map();
  const problems = [];
  readFileSync(path, 'utf8').split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const hash = line.indexOf('#');
    const name = (hash < 0 ? line : line.slice(0, hash)).trim();
    const reason = hash < 0 ? '' : line.slice(hash + 1).trim();
    if (!/^[a-z0-9][a-z0-9/_-]*$/.test(name)) problems.push(`line ${i + 1}: bad scenario name "${name}"`);
    else if (reason === '') problems.push(`line ${i + 1}: ${name} has no "# reason"`);
    else if (baseline.has(name)) problems.push(`line ${i + 1}: ${name} is listed twice`);
    else baseline.set(name, reason);
  });
  if (problems.length > 0) {
    console.error(`summarize.mjs: malformed baseline ${path}:\n  ${problems.join('\n  ')}`);
    process.exit(1);
  }
  return baseline;
}

// scenariosRun returns the scenario names the log says were run, in order, and whether the run
// reached its summary (a run that crashed or was killed did not).
function scenariosRun(log) {
  const names = [];
  for (const m of log.matchAll(/^=== Running scenario: (\S+) ===$/gm)) names.push(m[1]);
  return { names, complete: /^=== SUMMARY ===$/m.test(log) };
}

// checksByScenario maps scenario name to its parsed checks.json from the results directory,
// whose entries are named "server-<scenario>-<ISO time with : and . as ->".
function checksByScenario(dir) {
  const out = new Map();
  if (!existsSync(dir)) return out;
  for (const entry of readdirSync(dir)) {
    const m = /^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/.exec(entry);
    const file = join(dir, entry, 'checks.json');
    if (m && existsSync(file)) out.set(m[1], JSON.parse(readFileSync(file, 'utf8')));
  }
  return out;
}

// requiredServerScenarios returns the names in the `server:` list of a requirement set (a
// top-level key followed by "  - name" lines), or null without one.
function requiredServerScenarios(path) {
  if (!path) return null;
  const out = new Set();
  let inServer = false;
  for (const raw of readFileSync(path, 'utf8').split('\n')) {
    if (/^\S/.test(raw)) inServer = raw.trim() === 'server:';
    else if (inServer) {
      const m = /^\s+-\s+([a-z0-9][a-z0-9/_-]*)\s*$/.exec(raw);
      if (m) out.add(m[1]);
    }
  }
  return out;
}

const baseline = readBaseline(args.baseline);
const gaps = args['known-gaps'] ? readBaseline(args['known-gaps']) : new Map();
const required = requiredServerScenarios(args.requirements);
const { names: allNames, complete } = scenariosRun(readFileSync(args.log, 'utf8'));
const names = required ? allNames.filter((n) => required.has(n)) : allNames;
const unscored = required ? allNames.filter((n) => !required.has(n)) : [];
const checks = checksByScenario(args.results);

let passed = 0;
let failed = 0;
const unexpected = [];
const nowPassing = [];
const gapsFailing = [];
const gapsPassing = [];
for (const name of names) {
  const cs = checks.get(name);
  const bad = cs
    ? cs.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING')
    : [{ status: 'FAILURE', name: 'scenario', errorMessage: 'no checks.json: the scenario threw (see the log)' }];
  const known = baseline.get(name);
  const gap = gaps.get(name);
  if (bad.length === 0) {
    passed++;
    console.log(`  PASS ${name}${known ? '   (in baseline: now passes)' : ''}${gap ? '   (known gap: now passes)' : ''}`);
    if (known) nowPassing.push(name);
    if (gap) gapsPassing.push(name);
    continue;
  }
  failed++;
  if (gap && !known) {
    console.log(`  GAP  ${name}   (known gap, non-gating: ${gap})`);
    gapsFailing.push(name);
  } else {
    console.log(`  FAIL ${name}${known ? `   (expected: ${known})` : '   (NOT IN BASELINE)'}`);
  }
  for (const c of bad) {
    const msg = (c.errorMessage || c.description || '').replace(/\s+/g, ' ').slice(0, 300);
    console.log(`         ${c.status.toLowerCase()} ${c.name}: ${msg}`);
  }
  if (!known && !gap) unexpected.push(name);
}

const ran = new Set(names);
// The known-gaps file serves both 2026-07-28 runs: a run that ran none of its scenarios (the
// spec-version run has no input-required ones) is not told its names are stale.
const gapsNotRun = [...gaps.keys()].filter((n) => !ran.has(n));
const notRun = [...baseline.keys()].filter((n) => !ran.has(n));
if (gapsNotRun.length < gaps.size) notRun.push(...gapsNotRun);

let ok = true;
if (!complete) {
  console.log('\nThe conformance run did not reach its summary (crashed or timed out): see the log above.');
  ok = false;
}
if (names.length === 0) {
  console.log('\nNo scenario ran.');
  ok = false;
}
if (args.expect !== undefined && names.length !== Number(args.expect)) {
  console.log(`\n${names.length} scenarios ran, want ${args.expect} (the pinned suite's count for this spec version).`);
  ok = false;
}
if (unexpected.length > 0) {
  console.log(`\nFailures not in the baseline (regressions):\n  ${unexpected.join('\n  ')}`);
  ok = false;
}
if (nowPassing.length > 0) {
  console.log(`\nBaseline entries that now pass (remove them from the baseline):\n  ${nowPassing.join('\n  ')}`);
}
if (gapsPassing.length > 0) {
  console.log(`\nKnown gaps that now pass (remove them from the known gaps):\n  ${gapsPassing.join('\n  ')}`);
}
if (notRun.length > 0) {
  console.log(`\nBaseline or known-gap entries for scenarios that did not run (stale names?):\n  ${notRun.join('\n  ')}`);
}
if (args['known-gaps']) {
  // Failing, counted as failed above, and not gating: what toolgate has yet to build.
  console.log(`\nknown gaps (non-gating): ${gapsFailing.length} failing${gapsFailing.length ? `: ${gapsFailing.join(', ')}` : ''}`);
}
if (unscored.length > 0) {
  // Run but not scored by the requirement set (extensions, pending): reported, never failing.
  let up = 0;
  const uf = [];
  for (const name of unscored) {
    const cs = checks.get(name);
    if (cs && !cs.some((c) => c.status === 'FAILURE' || c.status === 'WARNING')) up++;
    else uf.push(name);
  }
  console.log(`\nunscored (not in the requirement set): ${up} passed, ${uf.length} failed${uf.length ? `: ${uf.join(', ')}` : ''}`);
}
console.log(`\n${args.label}: ${passed} passed, ${failed} failed`);
process.exit(ok ? 0 : 1);
