import { fork, spawnSync, type ChildProcess } from "node:child_process";
import type { Server } from "node:http";

/**
 * The compiled form of the benchmark's processes, as `npm start` runs the service: the
 * sources built to dist/ by tsc (scripts/build-if-stale.mjs), and the bench/internal scripts
 * transpiled beside them by esbuild, file by file, so their imports of the sources resolve to
 * dist/. Under tsx every closure the served code creates would also pay a `__name` call
 * (esbuild's keepNames), which the compiled service does not: about 4 % of a JSON request's
 * CPU in a profile. BENCH_TSX=1 runs the sources through tsx instead.
 */
let compiled: Promise<void> | undefined;
async function compiledScript(script: string): Promise<string> {
  compiled ??= (async () => {
    const built = spawnSync(process.execPath, ["scripts/build-if-stale.mjs"], { stdio: "inherit" });
    if (built.status !== 0) throw new Error("building dist/ failed (npm run build)");
    const { build } = await import("esbuild");
    await build({
      entryPoints: ["bench/internal/*.ts"],
      outdir: "dist/bench/internal",
      format: "esm",
      platform: "node",
      target: "node20",
      sourcemap: true,
      logLevel: "warning",
    });
  })();
  await compiled;
  return `dist/${script.replace(/\.ts$/, ".js")}`;
}

/**
 * Starts a benchmark process (a gateway, a mock upstream, `bench/internal/<name>.ts`) compiled
 * (above) and waits for the line `READY <words…>` it prints once it listens. Each benchmark
 * process is its own Node process, so load generator and server never share an event loop.
 */
export async function forkReady(
  script: string,
  env: Record<string, string | undefined>,
  execArgv: string[] = [],
): Promise<{ child: ChildProcess; words: string[] }> {
  const tsx = process.env.BENCH_TSX === "1";
  const child = fork(tsx ? script : await compiledScript(script), [], {
    execArgv: [...(tsx ? ["--import", "tsx"] : ["--enable-source-maps"]), ...execArgv],
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit", "ipc"],
  });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk) => {
      out += String(chunk);
      const match = /READY ([^\n]+)\n/.exec(out);
      if (match) resolve({ child, words: match[1]!.split(" ") });
    });
    child.once("exit", (code) => reject(new Error(`${script} exited with ${code} before it was ready`)));
  });
}

/**
 * The other side of forkReady for a plain `node:http` server (the mock provider, the floor
 * proxy): listens on a free loopback port with long keep-alive, prints `READY <origin>`, and
 * exits when the benchmark stops it or goes away.
 */
export function listenReady(server: Server): void {
  server.keepAliveTimeout = 60_000;
  server.listen(0, "127.0.0.1", () => {
    const address = server.address() as { port: number };
    process.stdout.write(`READY http://127.0.0.1:${address.port}\n`);
  });
  const stop = () => process.exit(0);
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  process.once("disconnect", stop);
}
