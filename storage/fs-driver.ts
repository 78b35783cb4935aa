import { randomBytes } from "node:crypto";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { defineDriver } from "unstorage";
import fsDriver from "unstorage/drivers/fs";

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
    const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
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
