import { ConfigError, loadConfig } from "../rpc/config.js";
import { createLogger } from "../rpc/log.js";
import { compose } from "../rpc/compose.js";
import { noTools } from "../rpc/tools/no-tools.js";
import { AdminError, runAdmin, USAGE } from "./admin-commands.js";

/**
 * `npm run admin -- <command> …` (docs/console-and-admin.md). Composes the service on the
 * storage the server uses (same env: STORAGE, DATA_DIR, REDIS_URL, REDIS_PREFIX,
 * GATEWAY_JWT_SECRET, DATA_ENCRYPTION_SECRET), dispatches the command's operator methods as the
 * local administrator, prints the result as JSON on stdout (log lines, at LOG_LEVEL, go to
 * stderr) and exits once the composition is closed (the events the command emitted are on the
 * bus): 0 done, 2 bad usage, 1 other failure.
 */
const args = process.argv.slice(2);
if (args.length === 0 || ["help", "--help", "-h"].includes(args[0]!)) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(args.length === 0 ? 2 : 0);
}

let exitCode = 0;
try {
  const config = loadConfig(process.env);
  // STORAGE=fs: with a server running on DATA_DIR, every storage operation goes through it.
  const log = createLogger(config.LOG_LEVEL, (line) => process.stderr.write(`${line}\n`));
  const composition = await compose(config, log, noTools, { whenDataDirOwned: "connect" });
  try {
    const result = await runAdmin(args, composition);
    process.stdout.write(`${typeof result === "string" ? result : JSON.stringify(result, null, 2)}\n`);
  } finally {
    await composition.close();
  }
} catch (error) {
  if (error instanceof AdminError || error instanceof ConfigError) {
    process.stderr.write(`admin: ${error.message}\n`);
    exitCode = error instanceof AdminError ? error.exitCode : 2;
  } else {
    process.stderr.write(`admin: ${error instanceof Error ? error.message : String(error)}\n`);
    exitCode = 1;
  }
}
process.exit(exitCode);
