import { crc32 } from "node:zlib";
import { mkdir, open, readdir, readFile, rename, rm, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { type Change, type LexRange, type RecordEngine, RecordMap } from "./record-map.js";

/**
 * The fs storage engine (docs/storage.md): every record lives in memory; each change is
 * applied to memory at once and appended to a journal, and the call resolves once the
 * journal is on disk (group commit: the changes made while one `fdatasync` runs go out
 * together in the next). In the background, once the journal has grown, the whole state is
 * written to a snapshot (temporary file, fsync, rename, fsync of the directory) and the
 * journal before it deleted. Lines carry a CRC-32, so the torn tail a kill -9 can leave is
 * recognised and dropped on the next open.
 *
 * Files, under `<dir>`:
 * - `snapshot`: line 1 `["h", G]`, then one `["s", key, value]` line per record, last
 *   `["e", count]`. Covers everything up to the start of journal G.
 * - `journal-<G>`: `["s", key, value]`, `["d", key]` (delete), `["c", prefix]` (delete every
 *   key under prefix), `["m", [change, …]]` (several changes in one line, so in one checksum:
 *   a record and its index entries land together or not at all). A change inside `m` is `s`,
 *   `d`, `["za", index, member, score]` (add to an index) or `["zr", index, member]` (drop from
 *   one). Every operation overwrites, so replaying a journal over a snapshot that already
 *   holds some of its changes gives the same state.
 * - A snapshot also holds one `["za", index, member, score]` line per index entry, after the
 *   records (docs/storage.md "Indexes").
 *
 * One process at a time: the caller holds the directory's owner lock (storage/owner.ts).
 */
export interface JournalOptions {
  /** Compact once the journal exceeds this many bytes and twice the last snapshot. */
  compactBytes?: number;
  /** Told about a compaction or flush that failed (the engine refuses writes after a failed flush). */
  onError?: (error: Error) => void;
}

type Op = ["s", string, string] | ["d", string] | ["c", string] | ["m", unknown[][]];

/** One change as a journal line's element (see above). */
function changeOp(change: Change): unknown[] {
  switch (change.op) {
    case "set":
      return ["s", change.key, change.value];
    case "remove":
      return ["d", change.key];
    case "index":
      return ["za", change.index, change.member, change.score];
    case "unindex":
      return ["zr", change.index, change.member];
  }
}

function opChange(op: unknown[]): Change | undefined {
  const [kind, a, b, c] = op as [string, string, string, number];
  if (kind === "s") return { op: "set", key: a, value: String(b) };
  if (kind === "d") return { op: "remove", key: a };
  if (kind === "za") return { op: "index", index: a, member: b, score: Number(c) };
  if (kind === "zr") return { op: "unindex", index: a, member: b };
  return undefined;
}

interface Batch {
  lines: string[];
  bytes: number;
  done: Promise<void>;
  resolve: () => void;
  reject: (error: Error) => void;
}

const DEFAULT_COMPACT_BYTES = 8 * 1024 * 1024;

export function encodeLine(op: unknown[]): string {
  const json = JSON.stringify(op);
  return `${crc32(json).toString(16).padStart(8, "0")} ${json}\n`;
}

/** Decodes one line (without its newline); null when its checksum does not match (torn or damaged). */
export function decodeLine(line: string): unknown[] | null {
  if (line.length < 10 || line[8] !== " ") return null;
  const json = line.slice(9);
  if (crc32(json).toString(16).padStart(8, "0") !== line.slice(0, 8)) return null;
  try {
    const value = JSON.parse(json);
    return Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

/**
 * Reads the checked lines of one file. A line that fails its checksum, or a last line without
 * its newline, ends the file: `torn` says how many bytes were dropped from there on.
 */
export function readLines(text: string): { ops: unknown[][]; torn: number } {
  const ops: unknown[][] = [];
  let start = 0;
  while (start < text.length) {
    const end = text.indexOf("\n", start);
    if (end === -1) break;
    const op = decodeLine(text.slice(start, end));
    if (!op) break;
    ops.push(op);
    start = end + 1;
  }
  return { ops, torn: Buffer.byteLength(text.slice(start)) };
}

export class Journal implements RecordEngine {
  readonly #dir: string;
  readonly #records = new RecordMap();
  readonly #data = this.#records.data;
  readonly #compactBytes: number;
  readonly #onError: (error: Error) => void;
  #generation = 0;
  #file: FileHandle | undefined;
  #journalBytes = 0;
  #snapshotBytes = 0;
  #open: Batch = newBatch();
  #flushing: Promise<void> | undefined;
  #writing: Promise<void> | undefined;
  #compacting: Promise<void> | undefined;
  #failed: Error | undefined;
  #closed = false;
  /** What the last open dropped from a torn journal tail (bytes), for tests and logs. */
  tornBytes = 0;
  /** Journal writes (each one write + fdatasync) so far. */
  flushes = 0;

  private constructor(dir: string, options: JournalOptions) {
    this.#dir = dir;
    this.#compactBytes = options.compactBytes ?? DEFAULT_COMPACT_BYTES;
    this.#onError = options.onError ?? (() => undefined);
  }

  /**
   * Loads the snapshot and replays the journals after it, then writes a fresh snapshot and
   * starts a new journal (so a torn tail is never appended to). `seed` supplies the records
   * of an older layout when the directory has neither snapshot nor journal yet.
   */
  static async open(
    dir: string,
    options: JournalOptions & { seed?: () => Promise<Map<string, string> | undefined> } = {},
  ): Promise<Journal> {
    const journal = new Journal(dir, options);
    await mkdir(dir, { recursive: true });
    const found = await journal.#load();
    if (!found && options.seed) {
      const seeded = await options.seed();
      if (seeded) for (const [key, value] of seeded) journal.#data.set(key, value);
    }
    await journal.#writeSnapshot(journal.#generation + 1);
    return journal;
  }

  get size(): number {
    return this.#data.size;
  }

  /** The failed write after which every write is refused (the process must restart), if there was one. */
  get failure(): Error | undefined {
    return this.#failed;
  }

  get(key: string): string | undefined {
    return this.#data.get(key);
  }

  has(key: string): boolean {
    return this.#data.has(key);
  }

  keys(prefix: string): string[] {
    return this.#records.keys(prefix);
  }

  members(index: string, range?: LexRange): string[] {
    return this.#records.members(index, range);
  }

  upTo(index: string, max: number, limit: number): { member: string; score: number }[] {
    return this.#records.upTo(index, max, limit);
  }

  count(index: string): number {
    return this.#records.count(index);
  }

  /** Applies every change in memory now, as one journal line; resolves once it is on disk. */
  write(changes: readonly Change[]): Promise<void> {
    this.#check();
    if (changes.length === 0) return Promise.resolve();
    this.#records.apply(changes);
    return this.#append(["m", changes.map(changeOp)]);
  }

  /** Sets `key` in memory now; resolves once the change is on disk. */
  set(key: string, value: string): Promise<void> {
    this.#check();
    this.#data.set(key, value);
    return this.#append(["s", key, value]);
  }

  remove(key: string): Promise<void> {
    this.#check();
    if (!this.#data.delete(key)) return Promise.resolve();
    return this.#append(["d", key]);
  }

  /** Removes every key under `prefix` ("" for all). */
  clear(prefix: string): Promise<void> {
    this.#check();
    for (const key of this.keys(prefix)) this.#data.delete(key);
    return this.#append(["c", prefix]);
  }

  /** Waits for every change made so far to be on disk. */
  async sync(): Promise<void> {
    while (this.#open.lines.length || this.#flushing) await (this.#flushing ?? this.#open.done);
  }

  /** Waits for every change to be on disk and for a compaction in progress to finish. */
  async settled(): Promise<void> {
    await this.sync();
    await this.#compacting;
  }

  /** Flushes, writes a final snapshot (a quick next open) and releases the files. */
  async close(): Promise<void> {
    if (this.#closed) return;
    await this.settled();
    this.#closed = true;
    if (!this.#failed) await this.#writeSnapshot(this.#generation + 1).catch((error) => this.#onError(error));
    await this.#file?.close();
    this.#file = undefined;
  }

  /** Snapshot now (tests; normally it runs once the journal has grown). */
  compact(): Promise<void> {
    this.#compacting ??= this.#compact().finally(() => (this.#compacting = undefined));
    return this.#compacting;
  }

  #check() {
    if (this.#closed) throw new Error("The fs storage is closed");
    if (this.#failed) throw new Error(`The fs storage stopped accepting writes after a failed journal write: ${this.#failed.message}`);
  }

  #append(op: Op): Promise<void> {
    const line = encodeLine(op);
    const batch = this.#open;
    batch.lines.push(line);
    batch.bytes += Buffer.byteLength(line);
    if (!this.#flushing) this.#flushing = this.#flushLoop();
    return batch.done;
  }

  /** Writes batch after batch: the one that fills while a flush runs goes out next, in one write. */
  async #flushLoop(): Promise<void> {
    // Let the changes of this turn of the event loop join the batch.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.#open.lines.length) {
      const batch = this.#open;
      this.#open = newBatch();
      // The file of this batch, even if a compaction switches journals meanwhile.
      const file = this.#file!;
      this.#writing = file.write(batch.lines.join("")).then(() => file.datasync());
      try {
        await this.#writing;
        this.flushes += 1;
        this.#journalBytes += batch.bytes;
        batch.resolve();
      } catch (error) {
        // Memory is ahead of the disk now: refuse further writes rather than acknowledge them.
        this.#failed = error as Error;
        batch.reject(error as Error);
        this.#open.reject(error as Error);
        this.#onError(error as Error);
        break;
      } finally {
        this.#writing = undefined;
      }
    }
    this.#flushing = undefined;
    if (!this.#failed && !this.#compacting && this.#journalBytes > Math.max(this.#compactBytes, 2 * this.#snapshotBytes)) {
      void this.compact().catch((error) => this.#onError(error));
    }
  }

  async #compact(): Promise<void> {
    if (this.#closed || this.#failed) return;
    // What is on disk so far is in the old journal; the state taken at the switch holds it
    // plus the changes still waiting, which go to the new journal (replayed again over this
    // snapshot, harmlessly: every operation overwrites).
    await this.#writeSnapshot(this.#generation + 1);
  }

  /**
   * Switches the changes from now on to journal `generation`, then writes a snapshot of the
   * state at the switch, which covers everything before it, and deletes the older journals
   * once it is in place.
   */
  async #writeSnapshot(generation: number): Promise<void> {
    const next = await open(join(this.#dir, `journal-${generation}`), "a");
    const previous = this.#file;
    this.#file = next;
    this.#generation = generation;
    this.#journalBytes = 0;
    // Taken in the same turn as the switch: every change is either in it or goes to `next`.
    const entries = [...this.#data];
    const indexEntries: unknown[][] = [];
    for (const [index, sorted] of this.#records.indexes)
      for (const [member, score] of sorted.entries()) indexEntries.push(["za", index, member, score]);
    // A batch in flight may still be writing to the old journal.
    await this.#writing;
    await previous?.close();
    const tmp = join(this.#dir, `snapshot.${process.pid}.tmp`);
    const file = await open(tmp, "w", 0o600);
    let bytes = 0;
    try {
      let chunk = encodeLine(["h", generation]);
      for (const [key, value] of entries) {
        chunk += encodeLine(["s", key, value]);
        if (chunk.length > 1 << 20) {
          bytes += Buffer.byteLength(chunk);
          await file.write(chunk);
          chunk = "";
        }
      }
      for (const op of indexEntries) {
        chunk += encodeLine(op);
        if (chunk.length > 1 << 20) {
          bytes += Buffer.byteLength(chunk);
          await file.write(chunk);
          chunk = "";
        }
      }
      chunk += encodeLine(["e", entries.length + indexEntries.length]);
      bytes += Buffer.byteLength(chunk);
      await file.write(chunk);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(tmp, join(this.#dir, "snapshot"));
    await syncDir(this.#dir);
    this.#snapshotBytes = bytes;
    for (const name of await readdir(this.#dir)) {
      const match = /^journal-(\d+)$/.exec(name);
      if (match && Number(match[1]) < generation) await rm(join(this.#dir, name), { force: true });
    }
  }

  /** True when there was a snapshot or a journal to load. */
  async #load(): Promise<boolean> {
    const names = await readdir(this.#dir);
    for (const name of names) if (name.endsWith(".tmp")) await rm(join(this.#dir, name), { force: true });
    let from = 0;
    let found = false;
    if (names.includes("snapshot")) {
      const { ops, torn } = readLines(await readFile(join(this.#dir, "snapshot"), "utf8"));
      const head = ops[0];
      const end = ops.at(-1);
      if (torn || head?.[0] !== "h" || end?.[0] !== "e" || end[1] !== ops.length - 2) {
        throw new Error(`${join(this.#dir, "snapshot")} is damaged (it is only ever replaced whole): restore it from a backup`);
      }
      from = Number(head[1]);
      for (const op of ops.slice(1, -1)) this.#apply(op);
      found = true;
    }
    const journals = names
      .map((name) => /^journal-(\d+)$/.exec(name))
      .filter((match): match is RegExpExecArray => !!match)
      .map((match) => Number(match[1]))
      .sort((a, b) => a - b);
    const replay = journals.filter((generation) => generation >= from);
    for (const [index, generation] of replay.entries()) {
      const path = join(this.#dir, `journal-${generation}`);
      const { ops, torn } = readLines(await readFile(path, "utf8"));
      if (torn && index < replay.length - 1) {
        throw new Error(
          `${path} is damaged before its end (only the last journal can have a torn tail): restore the data directory from a backup`,
        );
      }
      this.tornBytes += torn;
      for (const op of ops) this.#apply(op);
      found = true;
    }
    this.#generation = Math.max(from, ...journals, 0);
    return found;
  }

  #apply(op: unknown[]) {
    const [kind, key, value] = op as [string, string, string];
    if (kind === "s") this.#data.set(key, String(value));
    else if (kind === "d") this.#data.delete(key);
    else if (kind === "c") for (const existing of this.keys(key)) this.#data.delete(existing);
    else if (kind === "m") this.#records.apply((op[1] as unknown[][]).map(opChange).filter((change) => change !== undefined));
    else {
      const change = opChange(op);
      if (change) this.#records.apply([change]);
    }
  }
}

function newBatch(): Batch {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const done = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A batch nobody awaits (a remove of a missing key) must not surface as unhandled.
  done.catch(() => undefined);
  return { lines: [], bytes: 0, done, resolve, reject };
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
