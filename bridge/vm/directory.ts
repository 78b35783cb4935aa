import type { Store } from "../../storage/store.js";
import { VmPresenceRepo } from "../../storage/repos/vm-presence.js";
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
 * The VM presence registry shared by instances (STORAGE=redis). One record per connection
 * (storage/repos/vm-presence.ts, listed from its index), so an instance only ever writes and deletes its own records
 * (no read-modify-write race on a reconnect); the newest connection of a vmId wins. An
 * instance proves it is alive with a TTL key refreshed every heartbeat; records of a dead
 * instance are ignored and swept. Other drivers serve one process: the registry is that
 * process's own sockets.
 */
export class VmDirectory {
  readonly shared: boolean;
  readonly #presence: VmPresenceRepo<VmRecord>;
  readonly #instanceId: string;
  readonly #aliveTtlMs: number;
  readonly #localRecords: () => VmRecord[];
  #cache: Promise<Map<string, VmRecord>> | undefined;

  constructor(store: Store, instanceId: string, aliveTtlMs: number, localRecords: () => VmRecord[]) {
    this.shared = store.driver === "redis";
    this.#presence = new VmPresenceRepo<VmRecord>(store);
    this.#instanceId = instanceId;
    this.#aliveTtlMs = aliveTtlMs;
    this.#localRecords = localRecords;
  }

  markAlive(): Promise<void> {
    return this.#presence.markAlive(this.#instanceId, this.#aliveTtlMs);
  }

  markDead(): Promise<void> {
    return this.#presence.markDead(this.#instanceId);
  }

  async put(record: VmRecord): Promise<void> {
    await this.#presence.put(record);
  }

  remove(vmId: string, connectionId: string): Promise<void> {
    return this.#presence.remove(vmId, connectionId);
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
    return (await this.#read(vmId)).get(vmId);
  }

  #load(): Promise<Map<string, VmRecord>> {
    this.#cache ??= this.#read().catch((error) => {
      this.#cache = undefined;
      throw error;
    });
    return this.#cache;
  }

  /** Every VM's newest live connection (or one VM's); records of dead instances are swept. */
  async #read(vmId?: string): Promise<Map<string, VmRecord>> {
    const records = (await this.#presence.list(vmId)).filter((record) => record?.vmId);
    const alive = new Map<string, boolean>();
    for (const instanceId of new Set(records.map((record) => record.instanceId))) {
      alive.set(instanceId, instanceId === this.#instanceId || (await this.#presence.alive(instanceId)));
    }
    const byVm = new Map<string, VmRecord>();
    for (const record of records) {
      if (!alive.get(record.instanceId)) {
        await this.#presence.remove(record.vmId, record.connectionId).catch(() => undefined);
        continue;
      }
      const current = byVm.get(record.vmId);
      if (!current || current.connectedAt < record.connectedAt) byVm.set(record.vmId, record);
    }
    return byVm;
  }
}
