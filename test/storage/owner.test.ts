import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { claimDataDir, DataDirBusyError, processAlive } from "../../storage/owner.js";

/**
 * docs/crash-consistency.md "The DATA_DIR lock": a server killed with kill -9 whose parent
 * has not reaped it (a zombie) no longer holds DATA_DIR. Before, a restart straight after the
 * kill was refused ("DATA_DIR … in use by pid N") until the dead pid was reaped.
 */
const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

function procState(pid: number): Promise<string> {
  return readFile(`/proc/${pid}/stat`, "utf8").then(
    (stat) => stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3),
    () => "gone",
  );
}

describe.runIf(process.platform === "linux")("the DATA_DIR lock of a killed owner", () => {
  it("is taken over at once when the owner was killed and is still unreaped (a zombie)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-owner-"));
    dirs.push(dir);
    // `sh` starts the owner in the background, prints its pid, then becomes `sleep`, which
    // never waits for children: the killed owner stays a zombie until the sleep ends.
    const script = `import(${JSON.stringify(join(process.cwd(), "storage/owner.ts"))}).then((m) => m.claimDataDir(${JSON.stringify(dir)})).then(() => console.log("owned"))`;
    const parent = spawn("sh", ["-c", `${JSON.stringify(process.execPath)} --import tsx -e '${script}' & echo $!; exec sleep 60`], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    parent.stdout.on("data", (chunk) => (out += chunk.toString()));
    try {
      await vi.waitFor(() => expect(out).toContain("owned"), { timeout: 60_000, interval: 50 });
      const pid = Number(out.split("\n")[0]);
      expect(Number(await readFile(join(dir, ".owner"), "utf8"))).toBe(pid);
      // While it runs, DATA_DIR is busy.
      await expect(claimDataDir(dir)).rejects.toBeInstanceOf(DataDirBusyError);
      process.kill(pid, "SIGKILL");
      await vi.waitFor(async () => expect(await procState(pid)).toBe("Z"), { timeout: 10_000, interval: 20 });
      expect(processAlive(pid)).toBe(false);
      // The restart right after the kill: no wait for the reap, none for the stale time.
      const started = performance.now();
      const owner = await claimDataDir(dir);
      expect(performance.now() - started).toBeLessThan(2000);
      expect(Number(await readFile(join(dir, ".owner"), "utf8"))).toBe(process.pid);
      await owner.release();
    } finally {
      parent.kill("SIGKILL");
    }
  }, 90_000);

  it("a live owner, this process included, is alive", () => {
    expect(processAlive(process.pid)).toBe(true);
    expect(processAlive(process.ppid)).toBe(true);
  });
});
