import * as v from "valibot";
import { toolsDomain } from "./deps.js";

/** Bound on the storage probe (bridge health, /readyz), so a hung Redis makes health fail instead of hang. */
const PROBE_TIMEOUT_MS = 2000;

/**
 * Whether storage takes writes now (Store.probe: a write on Redis, so one past maxmemory fails
 * it as one that is unreachable does), within PROBE_TIMEOUT_MS.
 */
export async function probeStorage(store: { probe(): Promise<{ ok: boolean; error?: string }> }): Promise<{ ok: boolean; error?: string }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      store.probe(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS);
      }),
    ]);
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

export const bridgeHealthMethods = [
  toolsDomain.method({
    name: "bridge.health",
    summary:
      "Bridge health (docs/interface.md 4.5): storage, shared upstream MCP servers with their health (tenants' servers as " +
      "counts), connected VM agents. Public; `status` is `degraded` when storage fails or a shared server is " +
      "unhealthy.",
    input: v.object({}),
    auth: "public",
    output: v.object({
      status: v.pipe(v.string(), v.description("ok or degraded")),
      storage: v.object({ driver: v.string(), ok: v.boolean() }),
      vms: v.object({ connected: v.number(), inFlight: v.number() }),
      tools: v.number(),
    }),
    http: [{ surface: "bridge", method: "GET", path: "/health" }],
    async handler(_params, ctx) {
      const { store, upstream, vms, catalog } = ctx.deps;
      const storage = { driver: store.driver, ...(await probeStorage(store)) };
      const servers = upstream.summary();
      const stats = vms.stats();
      const tools = await catalog.list();
      // A tenant's server that is down is that tenant's concern, not the bridge's.
      const ok = storage.ok && servers.shared.every((server) => server.health !== "unhealthy");
      return {
        status: ok ? "ok" : "degraded",
        storage,
        // Public: shared servers by name; tenants' servers counted, their names stay private.
        mcpServers: servers.shared,
        tenantMcpServers: servers.tenants,
        vms: { connected: stats.connected, inFlight: stats.inFlight },
        tools: tools.length,
      };
    },
  }),
];
