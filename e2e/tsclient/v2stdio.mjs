// v2stdio.mjs is an MCP client on the TypeScript SDK v2 (@modelcontextprotocol/client, pinned in
// e2e/package.json) pinned to protocol 2026-07-28 over stdio, driven by
// TestTypeScriptV2ClientStdio.
//
// Usage: node v2stdio.mjs CONFIG_DIR TOOL ARGS [TOOL ARGS]... -- COMMAND [ARG]...
//
// It starts COMMAND (`toolgate serve --stdio …`) in CONFIG_DIR with this process's environment,
// connects to it over stdio (no initialize: server/discover), and calls each TOOL with the JSON
// arguments ARGS in turn, printing one JSON line per call: {"result": result} or, when the SDK
// refuses the answer or the call fails, {"error": message}. Errors outside a call go to stderr
// with exit status 1.
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const argv = process.argv.slice(2);
const sep = argv.indexOf('--');
const [dir, ...calls] = argv.slice(0, sep);
const [command, ...args] = argv.slice(sep + 1);
const emit = (v) => process.stdout.write(JSON.stringify(v) + '\n');

const client = new Client({ name: 'e2e-ts-v2-stdio', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
const transport = new StdioClientTransport({ command, args, cwd: dir, env: process.env, stderr: 'inherit' });
try {
  await client.connect(transport);
  for (let i = 0; i + 1 < calls.length; i += 2) {
    try {
      emit({ result: await client.callTool({ name: calls[i], arguments: JSON.parse(calls[i + 1]) }) });
    } catch (err) {
      emit({ error: err?.message ?? String(err) });
    }
  }
  await client.close();
  process.exit(0);
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
