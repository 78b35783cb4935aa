import type { Store } from "../../storage/store.js";
import type { VmIdentity } from "../../rpc/tools/ports.js";
import type { VmPrompt, VmResource, VmTool } from "./protocol.js";

/** Where a VM is connected and what it announced: what any instance needs to list or reach it. */
export interface VmRecord extends VmIdentity {
  instanceId: string;
  connectionId: string;
  connectedAt: string;
  tools: VmTool[];
  resources?: VmResource[];
  prompts?: VmPrompt[];
}

/**
 * The VM presence registry shared by instances (STORAGE=redis). One record per connection at
 * `vms:<vmId>:<connectionId>`, so an instance only ever writes and deletes its own records
 * (no read-modify-write race on a reconnect); the newest connection of a vmId wins. An
 * instance proves it is alive with a TTL key refreshed every heartbeat; records of a dead
 * instance are ignored and swept. Other drivers serve one process: the registry is that
 * process's own sockets.
 */
export class VmDirectory {
  readonly shared: boolean;
  readonly #store: Store;
  readonly #instanceId: string;
  readonly #aliveTtlMs: number;
  readonly #localRecords: () => VmRecord[];
  #cache: Promise<Map<string, VmRecord>> | undefined;

  constructor(store: Store, instanceId: string, aliveTtlMs: number, localRecords: () => VmRecord[]) {
    this.shared = store.driver === "redis";
    this.#store = store;
    this.#instanceId = instanceId;
    this.#aliveTtlMs = aliveTtlMs;
    this.#localRecords = localRecords;
  }

  #aliveKey(instanceId: string): string {
    return `vm-instance:${instanceId}`;
  }

  async markAlive(): Promise<void> {
    const key = this.#aliveKey(this.#instanceId);
    const current = await this.#store.atomic.get(key);
    await this.#store.atomic.compareAndSet(key, current, new Date().toISOString(), this.#aliveTtlMs);
  }

  async markDead(): Promise<void> {
    await this.#store.atomic.delete(this.#aliveKey(this.#instanceId));
  }

  async put(record: VmRecord): Promise<void> {
    await this.#store.kv.setItem(`vms:${record.vmId}:${record.connectionId}`, record as never);
  }

  async remove(vmId: string, connectionId: string): Promise<void> {
    await this.#store.kv.removeItem(`vms:${vmId}:${connectionId}`);
  }

  /** Forgets the cached list (a VM event arrived, or a heartbeat tick passed). */
  invalidate(): void {
    this.#cache = undefined;
  }

  async list(): Promise<VmRecord[]> {
    if (!this.shared) return this.#localRecords();
    return [...(await this.#load()).values()];
  }

  async find(vmId: string): Promise<VmRecord | undefined> {
    if (!this.shared) return this.#localRecords().find((record) => record.vmId === vmId);
    const cached = (await this.#load()).get(vmId);
    if (cached) return cached;
    // A VM that connected elsewhere a moment ago may precede its bus event: read its records directly.
    return (await this.#read(`vms:${vmId}`)).get(vmId);
  }

  #load(): Promise<Map<string, VmRecord>> {
    this.#cache ??= this.#read("vms").catch((error) => {
      this.#cache = undefined;
      throw error;
    });
    return this.#cache;
  }

  async #read(prefix: string): Promise<Map<string, VmRecord>> {
    const { kv, atomic } = this.#store;
    const keys = await kv.getKeys(prefix);
    const items = keys.length ? await kv.getItems(keys) : [];
    const records = items.map((item) => ({ key: item.key, record: item.value as unknown as VmRecord })).filter((item) => item.record?.vmId);
    const alive = new Map<string, boolean>();
    for (const instanceId of new Set(records.map((item) => item.record.instanceId))) {
      alive.set(instanceId, instanceId === this.#instanceId || (await atomic.get(this.#aliveKey(instanceId))) !== null);
    }
    const byVm = new Map<string, VmRecord>();
    for (const { key, record } of records) {
      if (!alive.get(record.instanceId)) {
        await kv.removeItem(key).catch(() => undefined);
        continue;
      }
      const current = byVm.get(record.vmId);
      if (!current || current.connectedAt < record.connectedAt) byVm.set(record.vmId, record);
    }
    return byVm;
  }
}
