import { loadConfig } from "../../rpc/config.js";
import { startServer } from "../../facade/server.js";
import { runAdmin } from "../../scripts/admin-commands.js";
import { createKey } from "../../rpc/keys/create-key.js";
import { answerLoopDelay } from "./loop-delay.js";

/**
 * The gateway under the chat benchmark, in its own process. Seeds, through the admin
 * commands, a user whose workspace holds plenty of credits and a Platform key with rpm and
 * tpm limits far above what the benchmark sends (so every limit is checked, none trips; the
 * rate-limit budgets and the users' plan are as large, unless the environment sets them),
 * a gateway key `sk_…` and an Account key (scope `intelligence`) of the same user, then prints
 * `READY <origin> <platform key> <gateway key> <account key>`. Log lines are built as in
 * production (LOG_LEVEL=info) and discarded, so their cost is measured without a pipe in the
 * way. The benchmark reads the process's event-loop delay over IPC (bench/internal/loop-delay.ts).
 */
const server = await startServer(
  loadConfig({
    PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "info",
    GATEWAY_API_RATE_LIMIT_RPM: "1000000",
    GATEWAY_TENANT_RATE_LIMIT_RPM: "100000000",
    GATEWAY_JWT_SECRET: "bench-secret-that-is-at-least-32-characters",
    DATA_ENCRYPTION_SECRET: "bench-data-secret-at-least-32-characters",
    // The Gateway and Account surfaces draw on the user's plan: one large enough that it never trips.
    PLANS_JSON: JSON.stringify({ free: { tokensPerWindow: 1_000_000_000_000, windowSeconds: 86_400 } }),
    ...process.env,
  }),
  { logSink: () => undefined },
);
const services = server.composition;
const email = `bench-${Date.now()}@example.com`;
const { user } = (await runAdmin(["create-user", "--email", email, "--password", "Correct-Horse-9"], services)) as {
  user: { id: string; workspaceId: string };
};
await runAdmin(["grant-credits", "--workspace", user.workspaceId, "--credits", "1000000000"], services);
const created = (await runAdmin(
  ["create-key", "--workspace", user.workspaceId, "--name", "bench", "--rpm", "1000000000", "--tpm", "1000000000000"],
  services,
)) as {
  key: string;
};
// A gateway key of the same user, for /gateway/v1 (the user's plan allowance; the benchmark
// sets a plan large enough through PLANS_JSON).
const gatewayKey = await createKey(
  { ...services.ports, keys: services.ports.repos.keys },
  { kind: "gateway", owner: user.id, userId: user.id, name: "bench", scopes: ["*"] },
);
const accountKey = await createKey(
  { ...services.ports, keys: services.ports.repos.keys },
  { kind: "account", owner: user.id, userId: user.id, name: "bench", scopes: ["intelligence"] },
);
answerLoopDelay();
process.stdout.write(`READY ${server.origin} ${created.key} ${gatewayKey.secret} ${accountKey.secret}\n`);

const stop = async () => {
  await server.close();
  process.exit(0);
};
process.once("SIGTERM", () => void stop());
process.once("SIGINT", () => void stop());
process.once("disconnect", () => void stop());
