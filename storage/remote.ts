import { chmod, rm } from "node:fs/promises";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { defineDriver, type Storage } from "unstorage";
import type { Atomic } from "./atomic.js";
import type { Bus } from "./bus.js";
import type { Indexes } from "./indexes.js";

/**
 * The owner's door for other processes on the same DATA_DIR (docs/storage.md): the process
 * that owns a DATA_DIR listens on the unix socket `DATA_DIR/.store.sock` (mode 0600 — the
 * file's permission is the authority, as for the data files beside it), and `npm run admin`,
 * finding the directory owned, sends its storage operations there instead of opening the
 * files. One JSON object per line each way: `{i, t, m, a}` → `{i, r}` or `{i, e}`.
 */

const KV_METHODS = ["hasItem", "getItem", "setItem", "removeItem", "getKeys", "clear"] as const;
export const ATOMIC_METHODS = [
  "increment",
  "counter",
  "setIfAbsent",
  "get",
  "delete",
  "compareAndSet",
  "adjust",
  "addAll",
  "debit",
  "balance",
  "hold",
  "settle",
  "renew",
  "account",
  "claimPlace",
  "releasePlace",
  "renewPlaces",
  "places",
] as const;

const INDEX_METHODS = ["write", "members", "upTo", "count"] as const;

interface Target {
  kv: Storage;
  indexes: Indexes;
  atomic: Atomic;
  bus: Bus;
}

interface Request {
  i: number;
  t: "kv" | "indexes" | "atomic" | "bus";
  m: string;
  a: unknown[];
}

function allowed(request: Request): boolean {
  if (!Array.isArray(request.a)) return false;
  if (request.t === "kv") return (KV_METHODS as readonly string[]).includes(request.m);
  if (request.t === "atomic") return (ATOMIC_METHODS as readonly string[]).includes(request.m);
  if (request.t === "indexes") return (INDEX_METHODS as readonly string[]).includes(request.m);
  return request.t === "bus" && request.m === "publish";
}

/** Reads newline-delimited JSON from a socket. */
function onLines(socket: Socket, handle: (value: unknown) => void) {
  let buffer = "";
  socket.setEncoding("utf8");
  socket.on("data", (chunk: string) => {
    buffer += chunk;
    let end: number;
    while ((end = buffer.indexOf("\n")) !== -1) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        socket.destroy();
        return;
      }
      handle(value);
    }
  });
}

/** Serves `target` on `path`; resolves to a function that stops serving. */
export async function serveStore(path: string, target: Target): Promise<() => Promise<void>> {
  // A socket left by a killed owner; this process holds the directory's lock now.
  await rm(path, { force: true });
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    onLines(socket, (value) => {
      const request = value as Request;
      const answer = (body: Record<string, unknown>) => {
        if (!socket.destroyed) socket.write(`${JSON.stringify({ i: request.i, ...body })}\n`);
      };
      if (!request || typeof request !== "object" || !allowed(request)) return answer({ e: "Unknown storage operation" });
      const object = target[request.t] as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
      Promise.resolve()
        .then(() => object[request.m]!(...request.a))
        .then(
          (result) => answer({ r: result ?? null }),
          (error: Error) => answer({ e: error?.message ?? String(error) }),
        );
    });
  });
  // Created without access for group and others, then made 0600 explicitly (a worker thread
  // cannot change the umask: there the chmod alone does it).
  let umask: number | undefined;
  try {
    umask = process.umask(0o177);
  } catch {
    umask = undefined;
  }
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } finally {
    if (umask !== undefined) process.umask(umask);
  }
  await chmod(path, 0o600);
  return async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(path, { force: true });
  };
}

export interface OwnerConnection {
  call(target: Request["t"], method: string, args: unknown[]): Promise<unknown>;
  close(): void;
}

/** Connects to the owner of a DATA_DIR; rejects when nobody listens on `path`. */
export function connectToOwner(path: string): Promise<OwnerConnection> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(path);
    const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
    let next = 0;
    let gone: Error | undefined;
    const fail = (error: Error) => {
      gone ??= error;
      for (const waiter of pending.values()) waiter.reject(gone);
      pending.clear();
    };
    socket.once("error", (error) => {
      reject(error);
      fail(new Error(`The process owning the data directory did not answer: ${error.message}`));
    });
    socket.on("close", () => fail(new Error("The process owning the data directory went away")));
    onLines(socket, (value) => {
      const { i, r, e } = value as { i: number; r?: unknown; e?: string };
      const waiter = pending.get(i);
      if (!waiter) return;
      pending.delete(i);
      if (e !== undefined) waiter.reject(new Error(e));
      else waiter.resolve(r);
    });
    socket.once("connect", () => {
      socket.on("error", () => undefined);
      resolve({
        call(t, m, a) {
          if (gone) return Promise.reject(gone);
          const i = ++next;
          return new Promise((res, rej) => {
            pending.set(i, { resolve: res, reject: rej });
            socket.write(`${JSON.stringify({ i, t, m, a })}\n`);
          });
        },
        close() {
          socket.end();
        },
      });
    });
  });
}

/** An unstorage driver whose every operation runs in the owner's storage. */
export const ownerDriver = defineDriver((connection: OwnerConnection) => {
  const call = (method: string, ...args: unknown[]) => connection.call("kv", method, args);
  return {
    name: "fs-owner",
    hasItem: (key: string) => call("hasItem", key) as Promise<boolean>,
    // The owner answers the parsed value; unstorage passes a non-string through as is.
    getItem: (key: string) => call("getItem", key) as Promise<never>,
    setItem: async (key: string, value: string) => void (await call("setItem", key, value)),
    removeItem: async (key: string) => void (await call("removeItem", key)),
    getKeys: (base: string) => call("getKeys", base) as Promise<string[]>,
    clear: async (base: string) => void (await call("clear", base)),
    dispose: () => connection.close(),
  };
});

/** The owner's indexes (records written with their index entries), operation by operation. */
export function ownerIndexes(connection: OwnerConnection): Indexes {
  const indexes: Record<string, unknown> = {};
  for (const method of INDEX_METHODS) indexes[method] = (...args: unknown[]) => connection.call("indexes", method, args);
  return indexes as unknown as Indexes;
}

/** The Atomic of the owner, operation by operation. */
export function ownerAtomic(connection: OwnerConnection): Atomic {
  const atomic: Record<string, unknown> = {};
  for (const method of ATOMIC_METHODS) atomic[method] = (...args: unknown[]) => connection.call("atomic", method, args);
  return atomic as unknown as Atomic;
}
