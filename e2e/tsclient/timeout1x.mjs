// timeout1x.mjs is an MCP client on the TypeScript SDK 1.x (@modelcontextprotocol/sdk, the
// version e2e/package-lock.json pins as a dependency of the npm servers), driven by
// TestTypeScriptTimeoutCancelsHeldCall: it calls t__big_result {"ts":"timeout"} (held for
// approval) with an onprogress handler but without resetTimeoutOnProgress and a timeout of
// TIMEOUT_MS, prints one JSON line ({"error": message, "code": n, "progress": count}, or
// {"result": …} should the call be answered) and exits at once, as a script ending on the error
// would: whatever the SDK sends on its timeout must be on its way by then.
//
// With EXIT=settle it first waits for every POST it started to be answered (so a
// notifications/cancelled the SDK sent on the timeout has reached toolgate); with EXIT=now it
// exits at once, as a script ending on the error would. Each POST carrying a notification is
// reported on stderr ("sent notifications/cancelled: 202").
//
// Usage: node timeout1x.mjs URL TOKEN TIMEOUT_MS EXIT
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token, timeoutMs, exitMode] = process.argv.slice(2);
const emit = (v) => process.stdout.write(JSON.stringify(v) + '\n');
const posts = new Set();
const tracingFetch = (input, init) => {
  const p = fetch(input, init);
  if (init?.method === 'POST') {
    let method = '';
    try { method = JSON.parse(init.body)?.method ?? ''; } catch { /* not JSON */ }
    const traced = p.then((r) => {
      if (method.startsWith('notifications/')) console.error(`sent ${method}: ${r.status}`);
      return r;
    }, (err) => {
      if (method.startsWith('notifications/')) console.error(`sending ${method} failed: ${err}`);
      throw err;
    });
    posts.add(traced);
    traced.then(() => posts.delete(traced), () => posts.delete(traced));
  }
  return p;
};
try {
  const client = new Client({ name: 'e2e-ts-timeout', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    fetch: tracingFetch,
  }));
  let progress = 0;
  try {
    const result = await client.callTool({ name: 't__big_result', arguments: { ts: 'timeout' } }, undefined,
      { onprogress: () => { progress++; }, timeout: Number(timeoutMs) });
    emit({ result, progress });
  } catch (err) {
    emit({ error: String(err?.message ?? err), code: err?.code ?? 0, progress });
  }
  if (exitMode === 'settle') {
    // The SDK sends notifications/cancelled after rejecting the call: give
    // it a turn to start, then wait for every POST in flight.
    await new Promise((r) => setImmediate(r));
    while (posts.size > 0) await Promise.allSettled([...posts]);
  }
  process.exit(0);
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
