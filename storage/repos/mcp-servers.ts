import { Collection } from "../collection.js";
import type { Store } from "../store.js";
import { SecretBox } from "../secret-box.js";
import { UsersRepo } from "./users.js";

/** An upstream MCP server whose tools join the catalog as `<name>__<tool>`, as the service uses it (header values in plaintext). */
export interface McpServerRecord {
  name: string;
  url: string;
  /** Sent on every request to the server (e.g. its own Authorization); encrypted at rest, never shown back. */
  headers: Record<string, string>;
  /** Catalog category of this server's tools. */
  category: string;
  /** The owning tenant; null for a server an operator shared with every tenant. */
  tenantId: string | null;
  createdBy: string;
  createdAt: string;
}

/** A registration or removal, told to every instance (bus channel below). */
export interface McpServerEvent {
  op: "added" | "removed";
  tenantId: string | null;
  name: string;
  /** The instance (or admin process) that made the change. */
  from: string;
}

/** Records written before servers had owners: `mcp-servers:<name>`, no `tenantId`, plaintext headers. */
type LegacyRecord = Omit<McpServerRecord, "tenantId"> & { tenantId?: undefined };

const CHANNEL = "mcp-servers";
/** Key segment of shared servers; tenant ids (`ten_…`) never start with `_`. */
const SHARED = "_shared";
/** Owner of a legacy record whose creator no longer exists: no tenant sees it. */
const ORPHANED = "_orphaned";

const ownerSegment = (tenantId: string | null) => tenantId ?? SHARED;

/**
 * Registered upstream servers, shared by every instance so each can reconnect them at start.
 * Records live under their owner (`mcp-servers:<tenantId|_shared>:<name>`), so names are
 * unique per tenant; a tenant cannot take a shared server's name and an operator cannot
 * share a name a tenant uses, so every tenant's view of `<server>__<tool>` is unambiguous.
 * Header values are sealed with AES-256-GCM (storage/secret-box.ts) before they are written;
 * records from before (plaintext headers, no owner) are rewritten when first read.
 */
export class McpServersRepo {
  readonly #store: Store;
  readonly #box: SecretBox;
  readonly #records: Collection<McpServerRecord | LegacyRecord>;
  readonly #users: UsersRepo;

  constructor(store: Store, box: SecretBox) {
    this.#store = store;
    this.#box = box;
    this.#records = new Collection<McpServerRecord | LegacyRecord>(store, "mcp-servers");
    this.#users = new UsersRepo(store);
  }

  #claim(tenantId: string | null, name: string) {
    return `mcp-server-name:${ownerSegment(tenantId)}:${name}`;
  }

  /** The tenant's server (or the shared one when `tenantId` is null); another tenant's is null like a missing one. */
  async get(tenantId: string | null, name: string): Promise<McpServerRecord | null> {
    if (!Collection.validId(name) || (tenantId !== null && !Collection.validId(tenantId))) return null;
    const stored = await this.#records.get(ownerSegment(tenantId), name);
    return stored ? this.#open(stored as McpServerRecord) : null;
  }

  /** Every server of every tenant, with header values opened (for the connections). */
  async list(): Promise<McpServerRecord[]> {
    const records: McpServerRecord[] = [];
    for (const stored of await this.#records.list()) {
      if (stored.tenantId === undefined) records.push(await this.#migrate(stored));
      else records.push(this.#open(stored));
    }
    return records;
  }

  /** How many servers the tenant has registered (its index's size, no record read; shared servers are no tenant's). */
  async countOf(tenantId: string): Promise<number> {
    if (!Collection.validId(tenantId)) return 0;
    return this.#records.count(tenantId);
  }

  /** Stores a new server; false when its owner (or, for a tenant, the shared scope) already has the name. */
  async create(record: McpServerRecord): Promise<boolean> {
    const claim = this.#claim(record.tenantId, record.name);
    if (!(await this.#store.atomic.setIfAbsent(claim, record.createdAt))) return false;
    const clash =
      record.tenantId === null
        ? (await this.#records.list()).some((other) => other.name === record.name && other.tenantId !== null)
        : (await this.#store.atomic.get(this.#claim(null, record.name))) !== null;
    if (clash) {
      await this.#store.atomic.delete(claim);
      return false;
    }
    await this.#put(record);
    return true;
  }

  async remove(tenantId: string | null, name: string): Promise<void> {
    await this.#records.remove(ownerSegment(tenantId), name);
    await this.#store.atomic.delete(this.#claim(tenantId, name));
  }

  /** Tells every instance about a change (the admin command uses this too). */
  announce(event: McpServerEvent): Promise<void> {
    return this.#store.bus.publish(CHANNEL, event);
  }

  subscribe(handler: (event: McpServerEvent) => void): Promise<() => Promise<void>> {
    return this.#store.bus.subscribe(CHANNEL, (message) => handler(message as McpServerEvent));
  }

  #put(record: McpServerRecord): Promise<unknown> {
    const headers = Object.fromEntries(Object.entries(record.headers).map(([name, value]) => [name, this.#box.seal(value)]));
    return this.#records.put([ownerSegment(record.tenantId), record.name], { ...record, headers });
  }

  /** Opens sealed header values; a plaintext one (written before encryption) is sealed in storage now. */
  #open(stored: McpServerRecord): McpServerRecord {
    const { headers, plaintext } = this.#openHeaders(stored.headers);
    const record = { ...stored, headers };
    if (plaintext) void this.#put(record).catch(() => undefined);
    return record;
  }

  #openHeaders(stored: Record<string, string> | undefined): { headers: Record<string, string>; plaintext: boolean } {
    let plaintext = false;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(stored ?? {})) {
      if (!SecretBox.isSealed(value)) plaintext = true;
      headers[name] = this.#box.openOrPlain(value);
    }
    return { headers, plaintext };
  }

  /** A record from before owners: it belongs to its creator's tenant, and is moved under it with sealed headers. */
  async #migrate(legacy: LegacyRecord): Promise<McpServerRecord> {
    const creator = Collection.validId(legacy.createdBy) ? await this.#users.get(legacy.createdBy) : null;
    const record: McpServerRecord = {
      ...legacy,
      headers: this.#openHeaders(legacy.headers).headers,
      tenantId: creator?.tenantId ?? ORPHANED,
    };
    await this.#store.atomic.setIfAbsent(this.#claim(record.tenantId, record.name), record.createdAt);
    await this.#put(record);
    await this.#records.remove(legacy.name);
    await this.#store.atomic.delete(`mcp-server-name:${legacy.name}`);
    return record;
  }
}
