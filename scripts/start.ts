import { ConfigError, loadConfig } from "../rpc/config.js";
import { startServer } from "../facade/server.js";

let config;
try {
  config = loadConfig(process.env);
} catch (error) {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  throw error;
}

const server = await startServer(config);
process.stderr.write(`Gateway listening (storage: ${config.STORAGE}${config.STORAGE === "fs" ? ` in ${config.DATA_DIR}` : ""})\n`);
for (const [name, url] of Object.entries(server.urls)) process.stderr.write(`  ${name.padEnd(12)} ${url}\n`);

let stopping = false;
const stop = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  process.stderr.write(`${signal}: shutting down\n`);
  await server.close();
  process.exit(0);
};
process.on("SIGINT", () => void stop("SIGINT"));
process.on("SIGTERM", () => void stop("SIGTERM"));
