import { createHash, randomBytes } from "node:crypto";

/** A random id with a readable type prefix, e.g. `usr_3n4…`. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString("base64url").replace(/[-_]/g, "x")}`;
}

export function sha256Hex(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

/** ISO 8601 in UTC. */
export function nowIso(): string {
  return new Date().toISOString();
}
