import { fork, type ChildProcess } from "node:child_process";
import type { Server } from "node:http";

/**
 * Starts a benchmark process (a gateway, a mock upstream) with tsx and waits for the line
 * `READY <words…>` it prints once it listens. Each benchmark process is its own Node process,
 * so load generator and server never share an event loop.
 */
export function forkReady(
  script: string,
  env: Record<string, string | undefined>,
  execArgv: string[] = [],
): Promise<{ child: ChildProcess; words: string[] }> {
  const child = fork(script, [], {
    execArgv: ["--import", "tsx", ...execArgv],
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
