import { loadConfig } from "../../rpc/config.js";
import { startServer } from "../../facade/server.js";
import { runAdmin } from "../../scripts/admin-commands.js";

/**
 * The gateway under the chat benchmark, in its own process. Seeds, through the admin
 * commands, a user whose workspace holds plenty of credits and a Platform key with rpm and
 * tpm limits far above what the benchmark sends (so every limit is checked, none trips),
 * then prints `READY <origin> <key>`. Log lines are built as in production (LOG_LEVEL=info)
 * and discarded, so their cost is measured without a pipe in the way.
 */
const server = await startServer(loadConfig({ PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "info", ...process.env }), { logSink: () => undefined });
const services = server.services;
const email = `bench-${Date.now()}@example.com`;
const { user } = (await runAdmin(["create-user", "--email", email, "--password", "Correct-Horse-9"], services)) as { user: { workspaceId: string } };
await runAdmin(["grant-credits", "--workspace", user.workspaceId, "--credits", "1000000000"], services);
const created = (await runAdmin(["create-key", "--workspace", user.workspaceId, "--name", "bench", "--rpm", "1000000000", "--tpm", "1000000000000"], services)) as {
  key: string;
};
process.stdout.write(`READY ${server.origin} ${created.key}\n`);

const stop = async () => {
  await server.close();
  process.exit(0);
};
process.once("SIGTERM", () => void stop());
process.once("SIGINT", () => void stop());
process.once("disconnect", () => void stop());
