import { parseArgs } from "node:util";
import { VmAgent } from "../bridge/vm/agent/client.js";
import { localTools } from "../bridge/vm/agent/local-tools.js";

const USAGE = `Usage: npm run vm-agent -- --url ws://127.0.0.1:8787/bridge/agents/<agent_id>/ws --vm-id <id> [--key <key>] [--root <dir>] [--tenant-id <id>]

Connects this machine to the bridge as a VM agent and serves: system_info, list_directory,
read_file (both confined to --root, default the current directory) and hash_text.
The key (a gateway key sk_…, a session token, or PLATFORM_SERVICE_KEY) may come from SERVICE_API_KEY.`;

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    "vm-id": { type: "string" },
    key: { type: "string" },
    root: { type: "string", default: process.cwd() },
    "tenant-id": { type: "string" },
    help: { type: "boolean", short: "h" },
  },
});
const log = (message: string) => process.stderr.write(`[vm-agent] ${message}\n`);

const key = values.key ?? process.env.SERVICE_API_KEY;
if (values.help || !values.url || !key) {
  process.stderr.write(`${USAGE}\n`);
  process.exit(values.help ? 0 : 2);
}
// The bridge's VM socket: a ws:// or wss:// URL, refused with one line otherwise (never echoed:
// a URL may carry a password).
const url = URL.canParse(values.url) ? new URL(values.url) : undefined;
if (!url || (url.protocol !== "ws:" && url.protocol !== "wss:")) {
  process.stderr.write(`--url must be a ws:// or wss:// URL (the bridge's VM socket)\n${USAGE}\n`);
  process.exit(2);
}
if (values["vm-id"]) url.searchParams.set("vmId", values["vm-id"]);
if (values["tenant-id"]) url.searchParams.set("tenantId", values["tenant-id"]);
if (!url.searchParams.get("vmId")) {
  process.stderr.write(`--vm-id is required (or vmId in the URL)\n${USAGE}\n`);
  process.exit(2);
}

const agent = new VmAgent({ url: url.toString(), key, tools: await localTools(values.root!), log });
const stop = (signal: string) => {
  log(`${signal}: disconnecting`);
  agent.stop();
};
process.once("SIGINT", () => stop("SIGINT"));
process.once("SIGTERM", () => stop("SIGTERM"));
try {
  await agent.run();
  process.exit(0);
} catch (error) {
  log((error as Error).message);
  process.exit(1);
}
