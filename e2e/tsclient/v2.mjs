// v2.mjs is an MCP client on the TypeScript SDK v2 (@modelcontextprotocol/client, pinned in
// e2e/package.json) pinned to protocol 2026-07-28, driven by TestTypeScriptV2Client.
//
// Usage: node v2.mjs URL TOKEN ALLOWED_TOOL ALLOWED_ARGS HELD_TOOL HELD_ARGS
//
// It connects to URL with bearer TOKEN (server/discover, no session), lists the tools and calls
// ALLOWED_TOOL with the JSON arguments ALLOWED_ARGS, printing one JSON line
// {"protocolVersion", "tools", "result"}. It then calls HELD_TOOL with HELD_ARGS, which the
// gateway holds for approval: the client declares neither Tasks nor URL elicitation (the SDK
// ships no Tasks), so it gets the max-hold pending answer, printed as {"pending": result}. It
// then waits for one line on stdin (the test approved), re-sends the identical call and prints
// {"result": result}. Every line goes to stdout; errors go to stderr with exit status 1.
import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, token, allowedTool, allowedArgs, heldTool, heldArgs] = process.argv.slice(2);
const stdin = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const emit = (v) => process.stdout.write(JSON.stringify(v) + '\n');

const client = new Client({ name: 'e2e-ts-v2', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
try {
  await client.connect(transport);
  const tools = await client.listTools();
  const allowed = await client.callTool({ name: allowedTool, arguments: JSON.parse(allowedArgs) });
  emit({ protocolVersion: transport.protocolVersion, tools: tools.tools.map((t) => t.name), result: allowed });

  const held = { name: heldTool, arguments: JSON.parse(heldArgs) };
  emit({ pending: await client.callTool(held) });
  const go = await stdin.next();
  if (go.done) throw new Error('stdin closed before the approval');
  emit({ result: await client.callTool(held) });
  await client.close();
  process.exit(0);
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
