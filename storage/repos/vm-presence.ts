import { Collection } from "../collection.js";
import type { Store } from "../store.js";

/** What presence needs of a VM connection's record (the bridge's VmRecord carries more). */
export interface PresenceRecord {
  vmId: string;
  connectionId: string;
  instanceId: string;
}

/**
 * Where VMs are connected, shared by instances on Redis (bridge/vm/directory.ts): one record
 * per connection at `vms:<vmId>:<connectionId>`, listed in whole and per VM
 * (storage/layout.ts), and per instance a mark with a TTL its heartbeat refreshes, so the
 * records of an instance that died are recognised as such.
 */
export class VmPresenceRepo<R extends PresenceRecord> {
  readonly #records: Collection<R>;
  readonly #atomic: Store["atomic"];

  constructor(store: Store) {
    this.#records = new Collection<R>(store, "vms");
    this.#atomic = store.atomic;
  }

  put(record: R): Promise<R> {
    return this.#records.put([record.vmId, record.connectionId], record);
  }

  remove(vmId: string, connectionId: string): Promise<void> {
    return this.#records.remove(vmId, connectionId);
  }

  /** Every connection's record, or those of one VM. */
  async list(vmId?: string): Promise<R[]> {
    if (vmId === undefined) return this.#records.list();
    return Collection.validId(vmId) ? this.#records.list(vmId) : [];
  }

  #aliveKey(instanceId: string): string {
    return `vm-instance:${instanceId}`;
  }

  /** Marks the instance alive for `ttlMs` more. */
  async markAlive(instanceId: string, ttlMs: number): Promise<void> {
    const key = this.#aliveKey(instanceId);
    const current = await this.#atomic.get(key);
    await this.#atomic.compareAndSet(key, current, new Date().toISOString(), ttlMs);
  }

  async markDead(instanceId: string): Promise<void> {
    await this.#atomic.delete(this.#aliveKey(instanceId));
  }

  async alive(instanceId: string): Promise<boolean> {
    return (await this.#atomic.get(this.#aliveKey(instanceId))) !== null;
  }
}
