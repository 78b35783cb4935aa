import { randomBytes } from "node:crypto";
import { mkdir, readdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { defineDriver } from "unstorage";
import fsDriver from "unstorage/drivers/fs";

/** `<record>.<pid>-<random>.tmp`: the writer's pid tells a later start whether it is still alive. */
const TEMP = /\.(?:(\d+)-)?[0-9a-f]{12}\.tmp$/;

/**
 * unstorage's fs driver, except that every write goes to a temporary file that is then
 * renamed over the target: a crash mid-write leaves the old record or the new one, never
 * half of one.
 */
export const atomicFsDriver = defineDriver((options: { base: string }) => {
  const base = resolve(options.base);
  const inner = fsDriver({ base });
  const pathOf = (key: string) => {
    const path = resolve(join(base, key.replace(/:/g, "/")));
    if (!path.startsWith(base + "/")) throw new Error(`Key outside the data directory: ${key}`);
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

function alive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

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
    if (pid !== undefined && alive(pid)) continue;
    await rm(join(base, entry), { force: true });
    removed += 1;
  }
  return removed;
}
