import { Collection } from "../collection.js";
import type { Store } from "../store.js";

/** An upstream MCP server whose tools join the catalog as `<name>__<tool>`. */
export interface McpServerRecord {
  name: string;
  url: string;
  /** Sent on every request to the server (e.g. its own Authorization); never shown back. */
  headers: Record<string, string>;
  /** Catalog category of this server's tools. */
  category: string;
  createdBy: string;
  createdAt: string;
}

/** Registered upstream servers; shared by every instance, so each can reconnect them at start. */
export class McpServersRepo {
  readonly #store: Store;
  readonly #records: Collection<McpServerRecord>;

  constructor(store: Store) {
    this.#store = store;
    this.#records = new Collection<McpServerRecord>(store.kv, "mcp-servers");
  }

  #claim(name: string) {
    return `mcp-server-name:${name}`;
  }

  get(name: string) {
    return Collection.validId(name) ? this.#records.get(name) : Promise.resolve(null);
  }

  list() {
    return this.#records.list();
  }

  /** Stores a new server; false when the name is taken (atomic across instances). */
  async create(record: McpServerRecord): Promise<boolean> {
    if (!(await this.#store.atomic.setIfAbsent(this.#claim(record.name), record.createdAt))) return false;
    await this.#records.put([record.name], record);
    return true;
  }

  async remove(name: string): Promise<void> {
    await this.#records.remove(name);
    await this.#store.atomic.delete(this.#claim(name));
  }
}
