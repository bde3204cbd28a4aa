// Verifies webhook deliveries with the Standard Webhooks reference library, as a bot would:
// reads [{secret, raw, headers, body (base64)}] on stdin and writes, for each, "ok" or the library's
// error. Run by webhooktest.StandardVerify; the library comes from the repository's node_modules.
"use strict";
const { Webhook } = require("standardwebhooks");
const { version } = require("standardwebhooks/package.json");

let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const results = JSON.parse(input).map(({ secret, raw, headers, body }) => {
    try {
      new Webhook(secret, raw ? { format: "raw" } : undefined).verify(Buffer.from(body, "base64"), headers);
      return "ok";
    } catch (err) {
      return String(err && err.message ? err.message : err);
    }
  });
  process.stdout.write(JSON.stringify({ version, results }));
});
