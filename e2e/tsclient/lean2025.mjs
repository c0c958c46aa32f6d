// lean2025.mjs is an MCP client on the TypeScript SDK v2 (@modelcontextprotocol/client, pinned in
// e2e/package.json) in its legacy mode (a 2025-era session with Mcp-Session-Id), driven by
// TestLeanCallsEndToEnd: the calls toolgate's lean front answers and those it hands to the SDK.
//
// Usage: node lean2025.mjs URL TOKEN
//
// On one session it calls, printing one JSON line each ({"step": name, "result": result} or
// {"step": name, "error": message}): t__echo_raw {"ts":1} (allowed), t__toggle_tool (denied),
// t__progress {"n":2} with a progress handler ({"progress": count} added), t__big_result (held:
// the test approves it), then t__slow {"ts":"cancel"}: after one line on stdin (the test saw it
// start upstream) the call is aborted. Each step's line also carries "contentType": the
// Content-Type of the answer to its tools/call POST (application/json when toolgate answered
// with the result alone, text/event-stream when it streamed) and "headersMs": how long that POST
// waited for its answer's headers (toolgate streams a call it has not answered within its first
// heartbeat, 1 s). Errors outside a step go to stderr with exit status 1.
import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, token] = process.argv.slice(2);
const stdin = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const emit = (v) => process.stdout.write(JSON.stringify(v) + '\n');

const client = new Client({ name: 'e2e-ts-lean', version: '1' }, { versionNegotiation: { mode: 'legacy' } });
// The Content-Type of the last answer to a tools/call POST.
let contentType = '';
let headersMs = 0;
const recordingFetch = async (input, init) => {
  const t0 = performance.now();
  const res = await fetch(input, init);
  if (init?.method === 'POST' && typeof init?.body === 'string' && init.body.includes('"tools/call"')) {
    contentType = res.headers.get('content-type') ?? '';
    headersMs = Math.round(performance.now() - t0);
  }
  return res;
};
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
  fetch: recordingFetch,
});
const step = async (name, params, options) => {
  contentType = '';
  try {
    const result = await client.callTool(params, options);
    emit({ step: name, result, contentType, headersMs });
  } catch (err) {
    emit({ step: name, error: String(err?.message ?? err), contentType, headersMs });
  }
};
try {
  await client.connect(transport);
  emit({ step: 'connected', session: transport.sessionId ?? '', protocolVersion: transport.protocolVersion ?? '' });
  await step('allowed', { name: 't__echo_raw', arguments: { ts: 1 } });
  await step('denied', { name: 't__toggle_tool', arguments: {} });
  let progress = 0;
  contentType = '';
  try {
    const result = await client.callTool({ name: 't__progress', arguments: { n: 2 } }, { onprogress: () => { progress++; } });
    emit({ step: 'progress', result, progress, contentType });
  } catch (err) {
    emit({ step: 'progress', error: String(err?.message ?? err) });
  }
  await step('held', { name: 't__big_result', arguments: { ts: 'held' } }, { timeout: 120000 });
  const abort = new AbortController();
  const cancelled = step('cancelled', { name: 't__slow', arguments: { ts: 'cancel' } }, { signal: abort.signal });
  const go = await stdin.next();
  if (go.done) throw new Error('stdin closed before the cancel');
  abort.abort('the test cancels');
  await cancelled;
  await client.close();
  process.exit(0);
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
