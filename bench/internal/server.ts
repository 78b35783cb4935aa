import { loadConfig } from "../../rpc/config.js";
import { startServer } from "../../facade/server.js";

/**
 * The server under benchmark, in its own process so its memory is measured alone. Prints
 * `READY <origin>`; answers `{type: "memory"}` IPC messages with process.memoryUsage() after a
 * full GC (run with --expose-gc).
 */
const server = await startServer(loadConfig({ PORT: "0", HOST: "127.0.0.1", ...process.env }), { logSink: () => undefined });
process.stdout.write(`READY ${server.origin}\n`);
process.on("message", (message: { type?: string }) => {
  if (message?.type !== "memory") return;
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) gc?.();
  process.send?.({ type: "memory", usage: process.memoryUsage(), vms: server.bridge.vms.stats() });
});
const stop = async () => {
  await server.close();
  process.exit(0);
};
process.once("SIGTERM", () => void stop());
process.once("SIGINT", () => void stop());
process.once("disconnect", () => void stop());
