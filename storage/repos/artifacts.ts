import { randomBytes } from "node:crypto";
import type { Storage } from "unstorage";
import { Collection } from "../collection.js";
import type { Store } from "../store.js";

export interface Artifact {
  id: string;
  workspaceId: string;
  name: string;
  contentType: string;
  size: number;
  /** Hex SHA-256 of the content; also its ETag. */
  sha256: string;
  createdBy: string;
  createdAt: string;
}

/**
 * A workspace's files: metadata as JSON under `artifacts:<workspace>:<id>`, the bytes as a raw
 * value under `artifact-blobs:<id>` (unstorage raw: a file on fs, a byte string in Redis,
 * never base64). The bytes are written before the metadata and removed after it, so a crash
 * leaves at most unreferenced bytes, never an artifact without content. Ids sort by creation
 * time, so a listing in key order is oldest first and a cursor is the last id seen.
 */
export class ArtifactsRepo {
  readonly #meta: Collection<Artifact>;
  readonly #kv: Storage;

  constructor(store: Store) {
    this.#kv = store.kv;
    this.#meta = new Collection<Artifact>(store, "artifacts");
  }

  static newId(): string {
    return `art_${Date.now().toString(36).padStart(9, "0")}${randomBytes(8).toString("hex")}`;
  }

  #blobKey(id: string) {
    return `artifact-blobs:${id}`;
  }

  async put(artifact: Artifact, content: Uint8Array): Promise<Artifact> {
    await this.#kv.setItemRaw(this.#blobKey(artifact.id), content);
    return this.#meta.put([artifact.workspaceId, artifact.id], artifact);
  }

  get(workspaceId: string, id: string): Promise<Artifact | null> {
    if (!Collection.validId(workspaceId) || !Collection.validId(id)) return Promise.resolve(null);
    return this.#meta.get(workspaceId, id);
  }

  async content(id: string): Promise<Uint8Array | null> {
    const raw = (await this.#kv.getItemRaw(this.#blobKey(id))) as Uint8Array | string | null;
    if (raw === null || raw === undefined) return null;
    return typeof raw === "string" ? new Uint8Array(Buffer.from(raw)) : new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);
  }

  /** Up to `limit` artifacts after the cursor (an id), oldest first; `next` when more follow. */
  async page(workspaceId: string, limit: number, after?: string): Promise<{ items: Artifact[]; next?: string }> {
    // One more than asked for tells whether more follow (the workspace's index, storage/layout.ts).
    const ids = await this.#meta.ids([workspaceId], { ...(after !== undefined ? { after } : {}), limit: limit + 1 });
    const chosen = ids.slice(0, limit).map((id) => this.#meta.key(workspaceId, id));
    const items = await this.#meta.getMany(chosen);
    return { items, ...(ids.length > limit && items.length ? { next: items[items.length - 1]!.id } : {}) };
  }

  async remove(artifact: Artifact): Promise<void> {
    await this.#meta.remove(artifact.workspaceId, artifact.id);
    await this.#kv.removeItem(this.#blobKey(artifact.id));
  }
}
