import { appendFile, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { decodeLine, encodeLine, Journal } from "../../storage/journal.js";

/**
 * The fs engine's journal (storage/journal.ts, docs/storage.md): changes acknowledged once on
 * disk, batched; a torn tail (kill -9 mid-write) detected by its checksum and dropped;
 * snapshots that replace the journals before them.
 */

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "gw-journal-"));
  dirs.push(dir);
  return dir;
}

async function journalFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((name) => name.startsWith("journal-")).sort();
}

/** The journal file changes go to now (the newest generation). */
async function current(dir: string): Promise<string> {
  const names = await journalFiles(dir);
  return join(dir, names.sort((a, b) => Number(a.slice(8)) - Number(b.slice(8))).at(-1)!);
}

describe("journal lines", () => {
  it("round-trip, and a changed byte or a cut line fails the checksum", () => {
    const line = encodeLine(["s", "users:usr_1", '{"id":"usr_1","note":"line\\nbreak"}']).trimEnd();
    expect(line.includes("\n")).toBe(false);
    expect(decodeLine(line)).toEqual(["s", "users:usr_1", '{"id":"usr_1","note":"line\\nbreak"}']);
    expect(decodeLine(line.replace("usr_1", "usr_2"))).toBeNull();
    expect(decodeLine(line.slice(0, -3))).toBeNull();
    expect(decodeLine("")).toBeNull();
  });
});

describe("journal", () => {
  it("keeps every acknowledged change across a reopen, deletes included", async () => {
    const dir = await tempDir();
    const journal = await Journal.open(dir);
    await Promise.all([journal.set("a:1", "one"), journal.set("a:2", "two"), journal.set("b:1", "three")]);
    await journal.remove("a:2");
    await journal.set("c:1", "x");
    await journal.clear("c:");
    expect(journal.keys("a:")).toEqual(["a:1"]);
    // No close: reopened as after a kill, from the journal alone.
    const reopened = await Journal.open(dir);
    expect(reopened.keys("").sort()).toEqual(["a:1", "b:1"]);
    expect(reopened.get("b:1")).toBe("three");
    await reopened.close();
    await journal.close();
  });

  it("commits concurrent writers in shared flushes", async () => {
    const dir = await tempDir();
    const journal = await Journal.open(dir);
    await Promise.all(Array.from({ length: 500 }, (_, i) => journal.set(`k:${i}`, String(i))));
    // One turn of the event loop's writes go out in one write + fdatasync.
    expect(journal.flushes).toBeLessThanOrEqual(2);
    const lines = (await readFile(await current(dir), "utf8")).trimEnd().split("\n");
    expect(lines).toHaveLength(500);
    await journal.close();
  });

  it("drops a torn tail — a half-written line, or a line whose checksum fails — and keeps everything before it", async () => {
    const dir = await tempDir();
    const journal = await Journal.open(dir);
    for (let i = 0; i < 5; i++) await journal.set(`k:${i}`, `v${i}`);
    const path = await current(dir);
    // What kill -9 during a batch write can leave: a complete line of an unacknowledged batch
    // whose bytes did not all reach the disk, then a cut one.
    const damaged = encodeLine(["s", "k:late", "never acknowledged"]).replace("never", "nevar");
    await appendFile(path, damaged + encodeLine(["s", "k:later", "cut"]).slice(0, 20));
    const reopened = await Journal.open(dir);
    expect(reopened.tornBytes).toBeGreaterThan(20);
    expect(reopened.keys("k:").sort()).toEqual(["k:0", "k:1", "k:2", "k:3", "k:4"]);
    expect(reopened.get("k:late")).toBeUndefined();
    // New changes never follow the torn bytes: they survive the next open.
    await reopened.set("k:5", "v5");
    const again = await Journal.open(dir);
    expect(again.tornBytes).toBe(0);
    expect(again.get("k:5")).toBe("v5");
    expect(again.size).toBe(6);
    for (const open of [again, reopened, journal]) await open.close();
  });

  it("refuses damage before the end of an older journal rather than lose what follows", async () => {
    const dir = await tempDir();
    const journal = await Journal.open(dir);
    await journal.set("k:1", "v1");
    const older = await current(dir);
    await writeFile(older, (await readFile(older, "utf8")).replace("v1", "v2"));
    // A later journal exists: the damaged one is not the tail.
    await writeFile(join(dir, `journal-${Number(older.split("-").at(-1)) + 1}`), encodeLine(["s", "k:2", "v2"]));
    await expect(Journal.open(dir)).rejects.toThrow(/damaged before its end/);
    await journal.close();
  });

  it("compacts into a snapshot in the background and deletes the journals it covers", async () => {
    const dir = await tempDir();
    const journal = await Journal.open(dir, { compactBytes: 4096 });
    for (let round = 0; round < 20; round++) {
      await Promise.all(Array.from({ length: 20 }, (_, i) => journal.set(`k:${i}`, `round ${round} ${"x".repeat(40)}`)));
    }
    await journal.compact();
    expect((await journalFiles(dir)).length).toBe(1);
    await journal.set("k:0", "after");
    // A reopen stands for a restart: the first instance must not be mid-compaction (it would
    // write the same snapshot file), as a killed process is not.
    await journal.settled();
    const reopened = await Journal.open(dir);
    expect(reopened.size).toBe(20);
    expect(reopened.get("k:0")).toBe("after");
    expect(reopened.get("k:19")).toBe(`round 19 ${"x".repeat(40)}`);
    await reopened.close();
    await journal.close();
  });

  it("loses nothing acknowledged to a compaction that runs while writes keep coming", async () => {
    const dir = await tempDir();
    const journal = await Journal.open(dir, { compactBytes: 1024 });
    const acknowledged: string[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async (_, writer) => {
        for (let i = 0; i < 60; i++) {
          const key = `w${writer}:${i}`;
          await journal.set(key, "y".repeat(50));
          acknowledged.push(key);
          if (i % 20 === 0) void journal.compact();
        }
      }),
    );
    // Reopened without close, as after a kill: the snapshot plus the journals after it (once
    // the compaction the writes started has finished, as a killed process writes nothing more).
    await journal.settled();
    const reopened = await Journal.open(dir);
    for (const key of acknowledged) expect(reopened.has(key), key).toBe(true);
    await reopened.close();
    await journal.close();
  });
});
