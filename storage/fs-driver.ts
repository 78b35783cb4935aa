import { randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { defineDriver } from "unstorage";
import fsDriver from "unstorage/drivers/fs";
import type { RecordEngine } from "./record-map.js";
import { processAlive } from "./owner.js";

/** `<record>.<pid>-<random>.tmp`: the writer's pid tells a later start whether it is still alive. */
const TEMP = /\.(?:(\d+)-)?[0-9a-f]{12}\.tmp$/;

/**
 * Blobs (artifact contents) stay files, outside the journal: unstorage's fs driver, except
 * that every write goes to a temporary file that is then renamed over the target: a crash
 * mid-write leaves the old record or the new one, never half of one.
 */
export const atomicFsDriver = defineDriver((options: { base: string }) => {
  const base = resolve(options.base);
  const inner = fsDriver({ base });
  const pathOf = (key: string) => {
    const path = resolve(join(base, key.replace(/:/g, "/")));
    if (!path.startsWith(`${base}/`)) throw new Error(`Key outside the data directory: ${key}`);
    return path;
  };
  const write = async (key: string, value: string) => {
    const path = pathOf(key);
    await mkdir(dirname(path), { recursive: true });
    const tmp = `${path}.${process.pid}-${randomBytes(6).toString("hex")}.tmp`;
    await writeFile(tmp, value, "utf8");
    await rename(tmp, path);
  };
  return {
    ...inner,
    name: "fs-atomic",
    setItem: (key: string, value: string) => write(key, value),
    setItemRaw: (key: string, value: string) => write(key, value),
    async getKeys(baseKey: string, opts: { maxDepth?: number }) {
      const keys = await inner.getKeys(baseKey, opts);
      return keys.filter((key: string) => !key.endsWith(".tmp"));
    },
  };
});

/**
 * Deletes the temporary files of writers that are gone (killed between write and rename),
 * leaving those of live processes (the admin command writing beside the server). Returns how
 * many went. Run when an fs store opens.
 */
export async function removeOrphanTempFiles(base: string): Promise<number> {
  let entries: string[];
  try {
    entries = await readdir(base, { recursive: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw error;
  }
  let removed = 0;
  for (const entry of entries) {
    const match = TEMP.exec(entry);
    if (!match) continue;
    const pid = match[1] ? Number(match[1]) : undefined;
    if (pid !== undefined && processAlive(pid)) continue;
    await rm(join(base, entry), { force: true });
    removed += 1;
  }
  return removed;
}

/**
 * The records of a RecordEngine (the fs Journal, storage/journal.ts, or the memory store's
 * records) as an unstorage driver: reads from memory, writes resolve once journaled.
 */
export const journalDriver = defineDriver((journal: RecordEngine) => ({
  name: "fs-journal",
  hasItem: (key: string) => journal.has(key),
  getItem: (key: string) => journal.get(key) ?? null,
  // Applied to memory within the call (LocalAtomic relies on it), durable when the promise resolves.
  setItem: (key: string, value: string) => journal.set(key, value),
  removeItem: (key: string) => journal.remove(key),
  getKeys: (base: string) => journal.keys(base),
  clear: (base: string) => journal.clear(base),
  dispose: () => journal.close(),
}));

/**
 * Where the records of the older one-file-per-record layout live: every file under DATA_DIR
 * except dot files and directories (secrets, locks, the journal) and the blob directories
 * that stay files.
 */
function legacyRecord(entry: string, keepAsFiles: string[]): boolean {
  const parts = entry.split("/");
  return !parts.some((part) => part.startsWith(".")) && !keepAsFiles.includes(parts[0]!) && !TEMP.test(entry);
}

/**
 * Reads the records of a DATA_DIR written in the one-file-per-record layout (key `a:b:c` in
 * file `a/b/c`), for the first open of the journal engine; undefined when there are none.
 */
export async function readLegacyLayout(
  base: string,
  keepAsFiles: string[],
): Promise<{ records: Map<string, string>; entries: string[] } | undefined> {
  const entries = await readdir(base, { recursive: true, withFileTypes: true });
  const records = new Map<string, string>();
  const top = new Set<string>();
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const path = relative(base, join(entry.parentPath ?? entry.path, entry.name));
    if (!legacyRecord(path, keepAsFiles)) continue;
    records.set(path.split("/").join(":"), await readFile(join(base, path), "utf8"));
    top.add(path.split("/")[0]!);
  }
  return records.size ? { records, entries: [...top] } : undefined;
}

/** Moves the imported top-level entries of the old layout under `DATA_DIR/.legacy-layout/` (kept, no longer read). */
export async function setLegacyLayoutAside(base: string, entries: string[]): Promise<void> {
  const aside = join(base, ".legacy-layout");
  await mkdir(aside, { recursive: true });
  for (const entry of entries) await rename(join(base, entry), join(aside, entry));
}
