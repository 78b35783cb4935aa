import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Collection } from "../collection.js";
import type { Store } from "../store.js";

/** A tenant's agent lock is a lease: a process killed while holding it frees it after this. */
const TENANT_LOCK_MS = 10_000;

/** Per-agent settings (docs/agents.md "config"). */
export interface AgentConfig {
  /** Rounds of tool calls before the run ends with `max_steps`. */
  maxSteps: number;
  systemPrompt?: string;
  temperature?: number;
  maxTokens?: number;
  /** Upper bound for one tool call; GATEWAY_TIMEOUT_SECONDS when absent. */
  toolTimeoutSeconds?: number;
}

/**
 * The stored fields of an agent (docs/interface.md 2.6). The shown `status` is not stored here: it is
 * derived from the lifecycle state and the running count kept in atomic storage
 * (rpc/agents/state.ts), so concurrent invocations and transitions never overwrite a record.
 */
export interface AgentRecord {
  id: string;
  name: string;
  model: string;
  tools: string[];
  description: string;
  config: AgentConfig;
  tenantId: string;
  /** The partition the record lives under: the tenant's creator (`Tenant.ownerId`), whoever created the agent. */
  ownerId: string;
  /** The member who created the agent (absent on agents made before tenant members). */
  createdBy?: string;
  /** ISO 8601 UTC without a zone suffix (docs/interface.md 2.6). */
  createdAt: string;
  updatedAt: string;
}

export type AgentLogLevel = "info" | "error";

/** One persisted log line of an agent (GET /agents/{id}/logs). */
export interface AgentLogEntry {
  seq: number;
  time: string;
  level: AgentLogLevel;
  event: string;
  message: string;
  runId?: string;
  data?: Record<string, unknown>;
}

/** A tenant created through POST /tenants, indexed under its owner so the list needs no scan. */
interface OwnedTenant {
  id: string;
}

const SEQ_WIDTH = 12;

/**
 * Agents under their owner (`agents:<ownerId>:<id>`): a lookup is one read and another
 * user's id simply is not there (the same 404 as a missing one). Logs live under the
 * agent with a zero-padded sequence number so key order is write order.
 */
/** A run in progress: who may cancel it, wherever it runs. Removed when the run ends. */
export interface AgentRunRecord {
  runId: string;
  agentId: string;
  userId: string;
  startedAt: string;
}

export class AgentsRepo {
  readonly #agents: Collection<AgentRecord>;
  readonly #logs: Collection<AgentLogEntry>;
  readonly #ownedTenants: Collection<OwnedTenant>;
  readonly #runs: Collection<AgentRunRecord>;
  readonly #store: Store;

  constructor(store: Store) {
    this.#store = store;
    this.#agents = new Collection<AgentRecord>(store, "agents");
    this.#logs = new Collection<AgentLogEntry>(store, "agent-logs");
    this.#ownedTenants = new Collection<OwnedTenant>(store, "tenant-owners");
    this.#runs = new Collection<AgentRunRecord>(store, "agent-runs");
  }

  /**
   * An agent by id alone, for members of its tenant who are not its partition owner: an
   * index `agent-owner:<id>` names the partition (written before the record). Agents written
   * before the index existed are found under `fallbackOwner` (the caller) only.
   */
  async find(id: string, fallbackOwner: string): Promise<AgentRecord | null> {
    if (!Collection.validId(id)) return null;
    const owner = await this.#store.atomic.get(`agent-owner:${id}`);
    return (owner ? await this.get(owner, id) : null) ?? (await this.get(fallbackOwner, id));
  }

  get(ownerId: string, id: string): Promise<AgentRecord | null> {
    if (!Collection.validId(ownerId) || !Collection.validId(id)) return Promise.resolve(null);
    return this.#agents.get(ownerId, id);
  }

  async list(ownerId: string): Promise<AgentRecord[]> {
    const agents = await this.#agents.list(ownerId);
    return agents.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  /** How many agents a tenant has: its records, counted (every agent of a tenant lives under the tenant's owner). */
  async countInTenant(ownerId: string, tenantId: string): Promise<number> {
    return (await this.#agents.list(ownerId)).filter((agent) => agent.tenantId === tenantId).length;
  }

  /**
   * Runs `fn` as the only creator of agents in the tenant, on every instance: a claim with a
   * lease, so a process killed while holding it blocks the others for at most
   * TENANT_LOCK_MS. Waiters poll every few milliseconds.
   */
  async withTenantLock<T>(tenantId: string, fn: () => Promise<T>): Promise<T> {
    const key = `tenant-agents-lock:${tenantId}`;
    const token = randomBytes(9).toString("base64url");
    const deadline = Date.now() + TENANT_LOCK_MS * 2;
    while (!(await this.#store.atomic.setIfAbsent(key, token, TENANT_LOCK_MS))) {
      if (Date.now() > deadline) throw new Error(`The agents of tenant ${tenantId} stayed locked`);
      await sleep(3 + Math.random() * 12);
    }
    try {
      return await fn();
    } finally {
      await this.#store.atomic.compareAndSet(key, token, null).catch(() => undefined);
    }
  }

  async put(agent: AgentRecord): Promise<AgentRecord> {
    await this.#store.atomic.setIfAbsent(`agent-owner:${agent.id}`, agent.ownerId);
    return this.#agents.put([agent.ownerId, agent.id], agent);
  }

  async remove(agent: AgentRecord): Promise<void> {
    await this.#agents.remove(agent.ownerId, agent.id);
    await this.#store.atomic.delete(`agent-owner:${agent.id}`);
  }

  appendLog(agentId: string, entry: AgentLogEntry): Promise<AgentLogEntry> {
    return this.#logs.put([agentId, String(entry.seq).padStart(SEQ_WIDTH, "0")], entry);
  }

  removeLog(agentId: string, seq: number): Promise<void> {
    return this.#logs.remove(agentId, String(seq).padStart(SEQ_WIDTH, "0"));
  }

  /** Every retained entry, oldest first. */
  logs(agentId: string): Promise<AgentLogEntry[]> {
    return this.#logs.list(agentId);
  }

  /** Removes every log line of the agent, in one step. */
  async clearLogs(agentId: string): Promise<void> {
    const ids = await this.#logs.ids([agentId]);
    await this.#store.indexes.write(ids.flatMap((id) => this.#logs.removeChanges([agentId, id])));
  }

  addOwnedTenant(ownerId: string, tenantId: string): Promise<OwnedTenant> {
    return this.#ownedTenants.put([ownerId, tenantId], { id: tenantId });
  }

  async ownedTenantIds(ownerId: string): Promise<string[]> {
    return (await this.#ownedTenants.list(ownerId)).map((entry) => entry.id);
  }

  saveRun(run: AgentRunRecord): Promise<AgentRunRecord> {
    return this.#runs.put([run.runId], run);
  }

  getRun(runId: string): Promise<AgentRunRecord | null> {
    if (!Collection.validId(runId)) return Promise.resolve(null);
    return this.#runs.get(runId);
  }

  removeRun(runId: string): Promise<void> {
    return this.#runs.remove(runId);
  }
}
