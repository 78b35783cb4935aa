import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import lockfile from "proper-lockfile";
import type { InterProcessLock } from "./atomic.js";

/**
 * How long a lock of a process that died (kill -9) blocks the others: proper-lockfile
 * refreshes the lock's mtime while it is held, and takes over one older than this.
 */
const STALE_MS = 5_000;

/**
 * One lock per atomic key under `DATA_DIR/.locks`, shared by every process on that directory
 * (the server and `npm run admin`). Waiters retry every few milliseconds — a read-modify-write
 * holds it for about a millisecond — for longer than a dead holder's lock takes to go stale.
 */
export async function fsInterProcessLock(dataDir: string): Promise<InterProcessLock> {
  const dir = join(dataDir, ".locks");
  await mkdir(dir, { recursive: true });
  return async (key) => {
    const file = join(dir, key.replace(/[^\w.-]/g, "_"));
    return lockfile.lock(file, {
      realpath: false,
      stale: STALE_MS,
      retries: { retries: 2_000, factor: 1.2, minTimeout: 1, maxTimeout: 20, randomize: true },
      // A lock found compromised (its directory removed under us) must not crash the process;
      // the operation under it has already been serialized in-process.
      onCompromised: () => undefined,
    });
  };
}
