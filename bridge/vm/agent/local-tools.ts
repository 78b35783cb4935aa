import { createHash } from "node:crypto";
import { open, readdir, realpath, stat } from "node:fs/promises";
import os from "node:os";
import { isAbsolute, relative, resolve, sep } from "node:path";
import type { ToolResult } from "../../../rpc/tools/types.js";

/** A tool the VM agent program serves: its announcement plus the code that runs it. */
export interface LocalTool {
  name: string;
  description: string;
  category: string;
  inputSchema: Record<string, unknown>;
  /** `signal` aborts when the bridge cancels the call (notifications/cancelled) or the socket closes. */
  run(args: Record<string, unknown>, signal: AbortSignal): Promise<ToolResult>;
}

/** Tool failures the caller should see as a result with isError (MCP: tool errors are results). */
export class ToolFailure extends Error {}

const text = (value: unknown): ToolResult => ({
  content: [{ type: "text", text: typeof value === "string" ? value : JSON.stringify(value, null, 2) }],
  ...(typeof value === "object" && value !== null && !Array.isArray(value) ? { structuredContent: value as Record<string, unknown> } : {}),
});

const MAX_ENTRIES = 1000;
const DEFAULT_READ_BYTES = 64 * 1024;
const MAX_READ_BYTES = 256 * 1024;

/** Resolves `path` inside `root`, following symlinks, and refuses anything that ends up outside. */
async function confined(root: string, path: unknown): Promise<string> {
  if (typeof path !== "string") throw new ToolFailure("path must be a string");
  const target = resolve(root, path);
  let real: string;
  try {
    real = await realpath(target);
  } catch {
    throw new ToolFailure(`No such file or directory: ${path}`);
  }
  const inside = relative(root, real);
  if (inside === ".." || inside.startsWith(`..${sep}`) || isAbsolute(inside))
    throw new ToolFailure(`Path is outside the shared root: ${path}`);
  return real;
}

/** The tools of `npm run vm-agent`: read-only, confined to `root`, with size caps. */
export async function localTools(rootDir: string): Promise<LocalTool[]> {
  const root = await realpath(rootDir);
  return [
    {
      name: "system_info",
      description: "Host name, OS, CPU count, memory, load and uptime of this machine.",
      category: "system",
      inputSchema: { type: "object", properties: {}, additionalProperties: false },
      async run() {
        return text({
          hostname: os.hostname(),
          platform: os.platform(),
          release: os.release(),
          arch: os.arch(),
          cpus: os.cpus().length,
          totalMemoryBytes: os.totalmem(),
          freeMemoryBytes: os.freemem(),
          loadAverage: os.loadavg(),
          uptimeSeconds: Math.round(os.uptime()),
          node: process.version,
        });
      },
    },
    {
      name: "list_directory",
      description: "Entries of a directory under the agent's shared root (name, type, size).",
      category: "files",
      inputSchema: {
        type: "object",
        properties: { path: { type: "string", description: "Relative to the shared root", default: "." } },
        additionalProperties: false,
      },
      async run(args, signal) {
        const dir = await confined(root, args.path ?? ".");
        if (!(await stat(dir)).isDirectory()) throw new ToolFailure(`Not a directory: ${String(args.path)}`);
        const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
        signal.throwIfAborted();
        const listed = await Promise.all(
          entries.slice(0, MAX_ENTRIES).map(async (entry) => ({
            name: entry.name,
            type: entry.isDirectory() ? "directory" : entry.isFile() ? "file" : entry.isSymbolicLink() ? "symlink" : "other",
            size: entry.isFile() ? ((await stat(resolve(dir, entry.name)).catch(() => undefined))?.size ?? null) : null,
          })),
        );
        return text({ path: relative(root, dir) || ".", entries: listed, truncated: entries.length > MAX_ENTRIES });
      },
    },
    {
      name: "read_file",
      description: `UTF-8 text of a file under the shared root, at most maxBytes (default ${DEFAULT_READ_BYTES}, cap ${MAX_READ_BYTES}).`,
      category: "files",
      inputSchema: {
        type: "object",
        properties: { path: { type: "string" }, maxBytes: { type: "integer", minimum: 1, maximum: MAX_READ_BYTES } },
        required: ["path"],
        additionalProperties: false,
      },
      async run(args, signal) {
        const file = await confined(root, args.path);
        const info = await stat(file);
        if (!info.isFile()) throw new ToolFailure(`Not a file: ${String(args.path)}`);
        const limit = Math.min(Math.max(1, Number(args.maxBytes) || DEFAULT_READ_BYTES), MAX_READ_BYTES);
        signal.throwIfAborted();
        const handle = await open(file, "r");
        try {
          const buffer = Buffer.alloc(Math.min(limit, info.size));
          const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
          return {
            content: [{ type: "text", text: buffer.subarray(0, bytesRead).toString("utf8") }],
            structuredContent: { size: info.size, truncated: info.size > bytesRead },
          };
        } finally {
          await handle.close();
        }
      },
    },
    {
      name: "hash_text",
      description: "Hex digest of a text (sha256 by default; sha1, sha512, md5).",
      category: "utility",
      inputSchema: {
        type: "object",
        properties: {
          text: { type: "string" },
          algorithm: { type: "string", enum: ["sha256", "sha1", "sha512", "md5"], default: "sha256" },
        },
        required: ["text"],
        additionalProperties: false,
      },
      async run(args) {
        if (typeof args.text !== "string") throw new ToolFailure("text must be a string");
        const algorithm = (args.algorithm as string | undefined) ?? "sha256";
        if (!["sha256", "sha1", "sha512", "md5"].includes(algorithm)) throw new ToolFailure(`Unsupported algorithm: ${algorithm}`);
        return text({ algorithm, digest: createHash(algorithm).update(args.text, "utf8").digest("hex") });
      },
    },
  ];
}
