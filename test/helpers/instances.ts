import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";

export interface Instance {
  origin: string;
  process: ChildProcess;
  stderr: string[];
  stop(): Promise<void>;
}

/** Starts test/fixtures/start-instance.ts as a child process and waits for its origin. */
export function startInstance(env: Record<string, string>, timeoutMs = 30_000): Promise<Instance> {
  const child = spawn(join("node_modules", ".bin", "tsx"), ["test/fixtures/start-instance.ts"], {
    env: { ...process.env, ...env },
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
