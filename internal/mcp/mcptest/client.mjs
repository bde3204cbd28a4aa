// A bot on npm's @modelcontextprotocol/sdk (the TypeScript SDK's client): it connects to the desk's
// /mcp with its key as a bearer token, lists the tools and makes the calls it reads on stdin,
// in order, then prints what it saw as JSON. Run by mcptest.go.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

// The package's exports map its package.json elsewhere: read the one at its root.
const require = createRequire(import.meta.url);
const root = require.resolve.paths("@modelcontextprotocol/sdk")
  .map((dir) => join(dir, "@modelcontextprotocol", "sdk", "package.json"))
  .find((file) => existsSync(file));
const { version } = JSON.parse(readFileSync(root, "utf8"));

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { url, key, calls } = JSON.parse(input);

const client = new Client({ name: "typescript-bot", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
await client.connect(transport);
const server = client.getServerVersion();
const { tools } = await client.listTools();
const results = [];
for (const call of calls) {
  const r = await client.callTool({ name: call.name, arguments: call.arguments });
  results.push({
    isError: r.isError === true,
    structuredContent: r.structuredContent ?? null,
    text: r.content.filter((c) => c.type === "text").map((c) => c.text).join(""),
  });
}
await client.close();
process.stdout.write(JSON.stringify({
  version,
  server: server.name,
  instructions: client.getInstructions() ?? "",
  tools: tools.map((t) => ({ name: t.name, inputSchema: t.inputSchema })),
  results,
}));
