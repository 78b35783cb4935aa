import { readFileSync } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import lockfile from "proper-lockfile";

/**
 * One process owns a DATA_DIR (docs/storage.md): it holds `DATA_DIR/.owner.lock`
 * (proper-lockfile: a directory whose mtime the owner refreshes every few seconds) and writes
 * its pid to `DATA_DIR/.owner`. A lock whose owner stopped refreshing it for STALE_MS is taken
 * over; so is one whose owner's pid no longer runs on this machine (kill -9), at once.
 */
const STALE_MS = 10_000;

export interface DataDirOwner {
  release(): Promise<void>;
}

export class DataDirBusyError extends Error {
  readonly code = "DATA_DIR_BUSY";
  constructor(
    readonly dataDir: string,
    readonly pid: number | undefined,
  ) {
    super(
      `DATA_DIR ${dataDir} is in use by another process${pid ? ` (pid ${pid})` : ""}: stop it or choose another DATA_DIR (npm run admin goes through the running server)`,
    );
  }
}

/**
 * Whether process `pid` runs on this machine (this process included). A process killed but not
 * yet reaped by its parent (a zombie: state `Z` or `X` in `/proc/<pid>/stat` on Linux) still
 * answers `kill(pid, 0)`, yet it will never write again: it counts as dead, so a restart right
 * after `kill -9` is not refused while the dead owner waits for its parent.
 */
export function processAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  return !isZombie(pid);
}

function isZombie(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return false; // no procfs (macOS): kill(pid, 0) is all there is
  }
  // "pid (comm) state …": comm may hold spaces and parentheses, the state follows the last ")".
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  return state === "Z" || state === "X";
}

async function ownerPid(dataDir: string): Promise<number | undefined> {
  const text = await readFile(join(dataDir, ".owner"), "utf8").catch(() => "");
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** Takes the DATA_DIR, or throws DataDirBusyError naming the process that has it. */
export async function claimDataDir(dataDir: string): Promise<DataDirOwner> {
  const lockfilePath = join(dataDir, ".owner.lock");
  const take = () =>
    lockfile.lock(dataDir, {
      lockfilePath,
      realpath: false,
      stale: STALE_MS,
      retries: 0,
      // Lost the lock (its directory removed, the clock jumped): stop taking writes rather
      // than share the directory. The journal's data on disk stays consistent.
      onCompromised: (error) => {
        process.stderr.write(`storage: the lock on DATA_DIR ${dataDir} was lost (${error.message}); exiting\n`);
        process.exit(1);
      },
    });
  let release: () => Promise<void>;
  try {
    release = await take();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ELOCKED") throw error;
    const pid = await ownerPid(dataDir);
    if (pid === undefined || processAlive(pid)) throw new DataDirBusyError(dataDir, pid);
    // The owner was killed: its lock would go stale in STALE_MS; no need to wait.
    await rm(lockfilePath, { recursive: true, force: true });
    try {
      release = await take();
    } catch (again) {
      if ((again as NodeJS.ErrnoException).code === "ELOCKED") throw new DataDirBusyError(dataDir, await ownerPid(dataDir));
      throw again;
    }
  }
  await writeFile(join(dataDir, ".owner"), String(process.pid), { mode: 0o600 });
  return {
    async release() {
      await rm(join(dataDir, ".owner"), { force: true });
      await release();
    },
  };
}
