import { spawn, type ChildProcess } from "node:child_process";
import { TEST_DATA_SECRET } from "./server.js";
import { TEST_REDIS_URL } from "./redis.js";

export interface Instance {
  origin: string;
  process: ChildProcess;
  stderr: string[];
  stop(): Promise<void>;
}

/**
 * Starts test/fixtures/start-instance.ts as a child process and waits for its origin. The
 * server is that very process (`node --import tsx`, not the tsx CLI, which runs the script in
 * a grandchild), so `process.kill("SIGKILL")` kills the server itself.
 */
export function startInstance(env: Record<string, string>, timeoutMs = 30_000): Promise<Instance> {
  const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/start-instance.ts"], {
    // Every instance of a test shares the secrets a deployment shares (docs/operating.md "Deploying").
    env: { ...process.env, REDIS_URL: TEST_REDIS_URL, DATA_ENCRYPTION_SECRET: TEST_DATA_SECRET, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stderr: string[] = [];
  child.stderr!.on("data", (chunk) => stderr.push(String(chunk)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`instance did not start: ${stderr.join("")}`));
    }, timeoutMs);
    let out = "";
    child.stdout!.on("data", (chunk) => {
      out += String(chunk);
      const match = /READY (\S+)/.exec(out);
      if (!match) return;
      clearTimeout(timer);
      resolve({
        origin: match[1]!,
        process: child,
        stderr,
        async stop() {
          if (child.exitCode !== null || child.signalCode !== null) return;
          child.kill("SIGTERM");
          const killer = setTimeout(() => child.kill("SIGKILL"), 5000);
          await exited;
          clearTimeout(killer);
        },
      });
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`instance exited with ${code}: ${stderr.join("")}`));
    });
  });
}

/** A JSON request to one instance: bearer `token`, JSON body; the answer's status and parsed body. */
export async function instanceRequest(origin: string, path: string, init: { method?: string; token?: string; json?: unknown } = {}) {
  const res = await fetch(origin + path, {
    method: init.method ?? "GET",
    headers: {
      ...(init.token ? { authorization: `Bearer ${init.token}` } : {}),
      ...(init.json ? { "content-type": "application/json" } : {}),
    },
    body: init.json ? JSON.stringify(init.json) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
