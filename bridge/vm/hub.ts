import { continueFrom, outgoingTraceparent } from "../../rpc/tracing.js";
import { randomUUID } from "node:crypto";
import { JSONRPCErrorException, JSONRPCServer } from "json-rpc-2.0";
import * as v from "valibot";
import type { Config } from "../../rpc/config.js";
import { ERROR_TABLE as ERROR_CODES, ServiceError, toServiceError } from "../../rpc/errors.js";
import type { Logger } from "../../rpc/log.js";
import type { Store } from "../../storage/store.js";
import type { ToolResult } from "../../rpc/tools/types.js";
import type { Catalog } from "../catalog.js";
import { VmConnection, type VmPeer } from "./connection.js";
import type { McpObject, VmAskMethod, VmIdentity } from "../../rpc/tools/ports.js";
import { CLOSE, registerParams, type VmTool } from "./protocol.js";
import { VmDirectory, type VmRecord } from "./directory.js";
import { vmToolSource } from "./source.js";
import { vmNotConnected } from "../../rpc/tools/sources.js";
import { VmOwnersRepo } from "../../storage/repos/vm-owners.js";
import { admitVmOwner } from "./ownership.js";
import { QuotasRepo } from "../../storage/repos/quotas.js";
import { quotaLimit, quotaReached } from "../../rpc/quotas.js";
import type { EmitEvent } from "../../rpc/tools/ports.js";

export interface VmHubOptions {
  config: Config;
  log: Logger;
  store: Store;
  catalog: Catalog;
  /** The service's own events (docs/events.md): `vm.disconnected`. */
  emit?: EmitEvent;
}

export interface VmCallOptions {
  timeoutMs: number;
  signal?: AbortSignal;
}

/** A call forwarded over the bus to the instance that holds the VM's socket. */
interface RemoteCall {
  callId: string;
  replyTo: string;
  vmId: string;
  tool: string;
  args: Record<string, unknown>;
  timeoutMs: number;
  /** A request other than tools/call (`tool` and `args` unused): resources/read or prompts/get with `params`. */
  ask?: { method: VmAskMethod; params: Record<string, unknown> };
  /** The forwarding call's span while tracing: the holding instance continues it. */
  traceparent?: string;
}

/** The forwarding instance's caller cancelled (or went away): the holding instance cancels the VM call. */
interface RemoteCancel {
  cancel: string;
}

interface RemoteReply {
  callId: string;
  result?: ToolResult | McpObject;
  error?: { code: string; message: string; details?: unknown };
}

interface VmEvent {
  instanceId: string;
  type: "connected" | "registered" | "left";
  vmId: string;
  connectionId: string;
  /** The VM's tenant, when it announced resources or prompts (their sessions are told the lists changed). */
  federatedFor?: string;
}

/** How long a forwarding instance waits past the timeout, so the owner's own TIMEOUT answer arrives first. */
const REMOTE_GRACE_MS = 500;

/**
 * Every VM socket of this instance, and the way to reach VMs on other instances
 * (docs/architecture.md "More than one instance"): presence records in storage, tool calls and catalog
 * events over the bus. Also the catalog's `vms` tool source.
 */
export class VmHub {
  readonly instanceId = randomUUID().slice(0, 12);
  readonly directory: VmDirectory;
  /** vmId → owning tenant, in storage so every instance applies the same rule. */
  readonly owners: VmOwnersRepo;
  /** The tenants' places among VM sockets and announced tools, shared by every instance (docs/quotas.md). */
  readonly #quotas: QuotasRepo;
  readonly #local = new Map<string, VmConnection>();
  readonly #server = new JSONRPCServer<VmConnection>({ errorListener: () => undefined });
  readonly #remote = new Map<
    string,
    { resolve: (r: ToolResult | McpObject) => void; reject: (e: ServiceError) => void; cleanup: () => void }
  >();
  readonly #unsubscribe: (() => Promise<void>)[] = [];
  /** Calls this instance runs for other instances, by callId, so their cancellation reaches the VM. */
  readonly #serving = new Map<string, AbortController>();
  readonly #opts: VmHubOptions;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: VmHubOptions) {
    this.#opts = options;
    this.owners = new VmOwnersRepo(options.store);
    this.#quotas = new QuotasRepo(options.store);
    this.directory = new VmDirectory(options.store, this.instanceId, options.config.VM_HEARTBEAT_SECONDS * 3_000, () =>
      this.#localRecords(),
    );
    this.#server.addMethod("tools/register", (params, conn) => this.#register(conn, params));
    this.#server.addMethod("ping", () => ({}));
    options.catalog.addSource(vmToolSource(this));
  }

  get shared(): boolean {
    return this.directory.shared;
  }

  /** Subscribes to the bus (redis) and starts the heartbeat. */
  async start(): Promise<void> {
    const { bus } = this.#opts.store;
    if (this.shared) {
      await this.directory.markAlive();
      this.#unsubscribe.push(
        await bus.subscribe(`vm:call:${this.instanceId}`, (message) => {
          if ("cancel" in (message as object)) this.#serving.get((message as RemoteCancel).cancel)?.abort();
          else void this.#serveRemote(message as RemoteCall);
        }),
        await bus.subscribe(`vm:reply:${this.instanceId}`, (message) => this.#onReply(message as RemoteReply)),
        await bus.subscribe("vm:events", (message) => this.#onEvent(message as VmEvent)),
      );
    }
    this.#timer = setInterval(() => this.#tick(), this.#opts.config.VM_HEARTBEAT_SECONDS * 1000);
    this.#timer.unref?.();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    const gone = new ServiceError("UNAVAILABLE", "The bridge is shutting down");
    for (const conn of this.#local.values()) conn.close(CLOSE.shutdown, "server shutting down", gone);
    const conns = [...this.#local.values()];
    this.#local.clear();
    for (const pending of this.#remote.values()) {
      pending.cleanup();
      pending.reject(gone);
    }
    this.#remote.clear();
    for (const serving of this.#serving.values()) serving.abort();
    this.#serving.clear();
    for (const unsubscribe of this.#unsubscribe.splice(0)) await unsubscribe().catch(() => undefined);
    await Promise.all(conns.map((conn) => this.#releasePlaces(conn)));
    if (this.shared) {
      await Promise.all(conns.map((conn) => this.directory.remove(conn.vmId, conn.id).catch(() => undefined)));
      await this.directory.markDead().catch(() => undefined);
    }
  }

  /** Counts for health checks and leak tests. */
  stats() {
    let inFlight = 0;
    for (const conn of this.#local.values()) inFlight += conn.inFlight;
    return { connected: this.#local.size, inFlight, forwarded: this.#remote.size };
  }

  local(vmId: string): VmConnection | undefined {
    return this.#local.get(vmId);
  }

  // --- socket lifecycle (bridge/vm/socket.ts) ---

  /**
   * Before the upgrade: 403 when the vmId belongs to another tenant (bridge/vm/ownership.ts),
   * 409 when the tenant has QUOTA_VM_SOCKETS_PER_TENANT sockets open on any instance
   * (docs/quotas.md). The socket's place is held by its vmId, so a VM that reconnects (its old
   * socket not yet gone, here or on another instance) keeps its place instead of taking a
   * second one; its lease is renewed by the heartbeat and released when the socket closes.
   */
  async admit(identity: VmIdentity): Promise<VmIdentity> {
    await admitVmOwner(this.owners, identity);
    const connectionId = randomUUID();
    const limit = quotaLimit(this.#opts.config, "vm_sockets_per_tenant");
    const claim = await this.#quotas.claim(
      "vm-sockets",
      identity.tenantId,
      { holder: identity.vmId, token: connectionId, weight: 1 },
      limit,
      this.#leaseMs,
    );
    if (!claim.taken) throw quotaReached("vm_sockets_per_tenant", limit, claim.others, { extra: { tenantId: identity.tenantId } });
    return { ...identity, connectionId };
  }

  /** A socket's places outlive three heartbeats without renewal: an instance that died frees them. */
  get #leaseMs(): number {
    return this.#opts.config.VM_HEARTBEAT_SECONDS * 3_000;
  }

  /** A VM socket opened. A previous socket with the same vmId (here or on another instance) is replaced. */
  attach(identity: VmIdentity, peer: VmPeer): VmConnection {
    const conn = new VmConnection(identity, peer, this.#server, this.#opts.log, this.#opts.config.GATEWAY_MAX_PAYLOAD_BYTES);
    const previous = this.#local.get(identity.vmId);
    if (previous) this.#replace(previous);
    this.#local.set(identity.vmId, conn);
    this.#opts.log.info({ event: "vm.connected", vmId: identity.vmId, agentId: identity.agentId, connectionId: conn.id });
    void this.#announce(conn, "connected");
    return conn;
  }

  /** The socket closed (any reason): in-flight calls fail now, the VM leaves the catalog. */
  detach(conn: VmConnection, code?: number): void {
    conn.closedByPeer(
      new ServiceError("BAD_GATEWAY", `VM ${conn.vmId} disconnected while the call was in flight`, {
        details: { vmId: conn.vmId, reason: "vm_disconnected", closeCode: code },
      }),
    );
    // Only the places this connection still owns: a newer socket of the vmId keeps its own.
    // (At shutdown `close` gives them back itself, before storage closes.)
    if (!this.#closed) void this.#releasePlaces(conn);
    if (this.#local.get(conn.vmId) !== conn) return; // already replaced
    this.#local.delete(conn.vmId);
    this.#opts.log.info({ event: "vm.disconnected", vmId: conn.vmId, connectionId: conn.id, code });
    this.#opts.emit?.(conn.identity.tenantId, "vm.disconnected", {
      vmId: conn.vmId,
      agentId: conn.identity.agentId,
      closeCode: code ?? null,
    });
    void this.#announce(conn, "left");
  }

  // --- calls ---

  /** The VM's presence record, wherever it is connected. */
  async find(vmId: string): Promise<VmRecord | undefined> {
    const conn = this.#local.get(vmId);
    if (conn) return this.#recordOf(conn);
    return this.shared ? this.directory.find(vmId) : undefined;
  }

  async list(): Promise<VmRecord[]> {
    return this.shared ? this.directory.list() : this.#localRecords();
  }

  /** Runs `tool` on the VM, on this instance or through the one holding its socket. */
  async call(vmId: string, tool: string, args: Record<string, unknown>, options: VmCallOptions): Promise<ToolResult> {
    const conn = this.#local.get(vmId);
    if (conn) return conn.callTool(tool, args, options);
    const record = this.shared ? await this.directory.find(vmId) : undefined;
    if (!record) throw vmNotConnected(vmId);
    return this.#forward(record, tool, args, options);
  }

  /** `resources/read` or `prompts/get` on the VM, on this instance or through the one holding its socket. */
  async ask(vmId: string, method: VmAskMethod, params: Record<string, unknown>, options: VmCallOptions): Promise<McpObject> {
    const conn = this.#local.get(vmId);
    if (conn) return conn.ask(method, params, options);
    const record = this.shared ? await this.directory.find(vmId) : undefined;
    if (!record) throw vmNotConnected(vmId);
    return this.#forward(record, method, {}, options, { method, params });
  }

  // --- internals ---

  #recordOf(conn: VmConnection): VmRecord {
    return {
      ...conn.identity,
      instanceId: this.instanceId,
      connectionId: conn.id,
      connectedAt: conn.connectedAt,
      tools: conn.tools,
      ...(conn.resources.length ? { resources: conn.resources } : {}),
      ...(conn.prompts.length ? { prompts: conn.prompts } : {}),
    };
  }

  #localRecords(): VmRecord[] {
    return [...this.#local.values()].map((conn) => this.#recordOf(conn));
  }

  #replace(previous: VmConnection): void {
    this.#local.delete(previous.vmId);
    void this.#releasePlaces(previous);
    previous.close(
      CLOSE.replaced,
      "replaced by a newer connection",
      new ServiceError("BAD_GATEWAY", `VM ${previous.vmId} reconnected; calls on the old connection were dropped`, {
        details: { vmId: previous.vmId, reason: "vm_replaced" },
      }),
    );
    this.#opts.log.info({ event: "vm.replaced", vmId: previous.vmId, connectionId: previous.id });
    if (this.shared) void this.directory.remove(previous.vmId, previous.id).catch(() => undefined);
  }

  async #register(conn: VmConnection, raw: unknown): Promise<{ tools: string[] }> {
    const parsed = v.safeParse(registerParams, raw ?? {});
    if (!parsed.success) {
      const issues = parsed.issues.map((issue) => ({ path: v.getDotPath(issue) ?? "", message: issue.message }));
      throw new JSONRPCErrorException(
        `Invalid tools/register params: ${issues[0]!.path ? `${issues[0]!.path}: ` : ""}${issues[0]!.message}`,
        -32602,
        { issues },
      );
    }
    await this.#claimTools(conn, parsed.output.tools.length);
    conn.tools = parsed.output.tools as VmTool[];
    conn.resources = parsed.output.resources ?? [];
    conn.prompts = parsed.output.prompts ?? [];
    await this.#announce(conn, "registered");
    return { tools: conn.tools.map((tool) => tool.name) };
  }

  /**
   * QUOTA_VM_TOOLS_PER_TENANT (docs/quotas.md): the tools all of a tenant's connected VMs
   * announce, on every instance, counted as one leased place per VM weighing its tool count.
   * Past it the announcement is refused with a JSON-RPC error (-32009, the quota's details in
   * `data`); the socket stays up and the VM's previous list stays, as for the per-source bound.
   */
  async #claimTools(conn: VmConnection, count: number): Promise<void> {
    const tenantId = conn.identity.tenantId;
    const limit = quotaLimit(this.#opts.config, "vm_tools_per_tenant");
    const claim = await this.#quotas.claim(
      "vm-tools",
      tenantId,
      { holder: conn.vmId, token: conn.id, weight: count },
      limit,
      this.#leaseMs,
    );
    if (!claim.taken) {
      const refusal = quotaReached("vm_tools_per_tenant", limit, claim.others + claim.own, { extra: { tenantId, requested: count } });
      throw new JSONRPCErrorException(`${refusal.message}: this VM announces ${count}`, ERROR_CODES.CONFLICT.rpc, refusal.details);
    }
    if (conn.closed) await this.#releasePlaces(conn);
  }

  /**
   * Gives back the places a connection still owns (its socket and its tools); never fails: a
   * place that could not be given back ends with its lease.
   */
  async #releasePlaces(conn: VmConnection): Promise<void> {
    const tenantId = conn.identity.tenantId;
    await Promise.all([
      this.#quotas.release("vm-sockets", tenantId, conn.vmId, conn.id),
      this.#quotas.release("vm-tools", tenantId, conn.vmId, conn.id),
    ]).catch((error: unknown) => this.#opts.log.info({ event: "vm.quota_release_failed", vmId: conn.vmId, error: String(error) }));
  }

  /** Renews the leases of this instance's sockets and tools, one call per tenant and quota. */
  async #renewPlaces(conns: VmConnection[]): Promise<void> {
    const byTenant = new Map<string, VmConnection[]>();
    for (const conn of conns) byTenant.set(conn.identity.tenantId, [...(byTenant.get(conn.identity.tenantId) ?? []), conn]);
    for (const [tenantId, held] of byTenant) {
      await this.#quotas.renew(
        "vm-sockets",
        tenantId,
        held.map((conn) => ({ holder: conn.vmId, token: conn.id, weight: 1 })),
        this.#leaseMs,
      );
      const withTools = held.filter((conn) => conn.tools.length > 0);
      if (withTools.length)
        await this.#quotas.renew(
          "vm-tools",
          tenantId,
          withTools.map((conn) => ({ holder: conn.vmId, token: conn.id, weight: conn.tools.length })),
          this.#leaseMs,
        );
    }
  }

  /** Publishes presence and tells every catalog (here at once, elsewhere over the bus). */
  async #announce(conn: VmConnection, type: VmEvent["type"]): Promise<void> {
    this.directory.invalidate();
    this.#opts.catalog.changed();
    const federates = conn.resources.length > 0 || conn.prompts.length > 0;
    if (federates && type !== "connected") this.#listsChanged(conn.identity.tenantId);
    if (!this.shared || this.#closed) return;
    try {
      if (type === "left") await this.directory.remove(conn.vmId, conn.id);
      else if (!conn.closed) await this.directory.put(this.#recordOf(conn));
      const event: VmEvent = {
        instanceId: this.instanceId,
        type,
        vmId: conn.vmId,
        connectionId: conn.id,
        ...(federates ? { federatedFor: conn.identity.tenantId } : {}),
      };
      await this.#opts.store.bus.publish("vm:events", event);
    } catch (error) {
      this.#opts.log.error({ event: "vm.presence_failed", vmId: conn.vmId, error: String(error) });
    }
  }

  #onEvent(event: VmEvent): void {
    if (event.instanceId === this.instanceId) return;
    this.directory.invalidate();
    // A VM that reconnected elsewhere replaces its socket here.
    const local = this.#local.get(event.vmId);
    if (event.type === "connected" && local && local.id !== event.connectionId) this.#replace(local);
    this.#opts.catalog.changed();
    if (event.federatedFor) this.#listsChanged(event.federatedFor);
  }

  /** A VM's resources or prompts came or went: the tenant's MCP sessions are told both lists changed. */
  #listsChanged(tenantId: string): void {
    this.#opts.catalog.notice({ kind: "resources/list_changed", owner: tenantId, source: "vm" });
    this.#opts.catalog.notice({ kind: "prompts/list_changed", owner: tenantId, source: "vm" });
  }

  #forward(record: VmRecord, tool: string, args: Record<string, unknown>, options: VmCallOptions): Promise<ToolResult>;
  #forward(
    record: VmRecord,
    tool: string,
    args: Record<string, unknown>,
    options: VmCallOptions,
    ask: RemoteCall["ask"],
  ): Promise<McpObject>;
  #forward(
    record: VmRecord,
    tool: string,
    args: Record<string, unknown>,
    options: VmCallOptions,
    ask?: RemoteCall["ask"],
  ): Promise<ToolResult | McpObject> {
    const callId = randomUUID();
    return new Promise<ToolResult | McpObject>((resolve, reject) => {
      const timer = setTimeout(() => {
        finish();
        reject(
          new ServiceError("TIMEOUT", `VM ${record.vmId} did not answer tools/call ${tool} within ${options.timeoutMs / 1000} s`, {
            details: { vmId: record.vmId, tool },
          }),
        );
      }, options.timeoutMs + REMOTE_GRACE_MS);
      const onAbort = () => {
        finish();
        reject(new ServiceError("UNAVAILABLE", "The caller went away"));
        // The instance holding the socket tells the VM (notifications/cancelled).
        const cancel: RemoteCancel = { cancel: callId };
        this.#opts.store.bus.publish(`vm:call:${record.instanceId}`, cancel).catch(() => undefined);
      };
      options.signal?.addEventListener("abort", onAbort, { once: true });
      const cleanup = () => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
      };
      const finish = () => {
        cleanup();
        this.#remote.delete(callId);
      };
      this.#remote.set(callId, {
        resolve: (result) => (finish(), resolve(result)),
        reject: (error) => (finish(), reject(error)),
        cleanup,
      });
      const message: RemoteCall = {
        callId,
        replyTo: this.instanceId,
        vmId: record.vmId,
        tool,
        args,
        timeoutMs: options.timeoutMs,
        ...(ask ? { ask } : {}),
      };
      const traceparent = outgoingTraceparent();
      if (traceparent) message.traceparent = traceparent;
      this.#opts.store.bus.publish(`vm:call:${record.instanceId}`, message).catch((error) => {
        this.#remote.get(callId)?.reject(new ServiceError("UNAVAILABLE", "Could not reach the instance holding the VM", { cause: error }));
      });
    });
  }

  async #serveRemote(call: RemoteCall): Promise<void> {
    let reply: RemoteReply;
    const controller = new AbortController();
    this.#serving.set(call.callId, controller);
    try {
      const conn = this.#local.get(call.vmId);
      if (!conn) throw vmNotConnected(call.vmId);
      const options = { timeoutMs: call.timeoutMs, signal: controller.signal };
      reply = {
        callId: call.callId,
        result: await continueFrom(call.traceparent, () =>
          call.ask ? conn.ask(call.ask.method, call.ask.params, options) : conn.callTool(call.tool, call.args ?? {}, options),
        ),
      };
    } catch (error) {
      if (controller.signal.aborted) return; // the forwarding instance answered its caller already
      const serviceError = toServiceError(error);
      reply = { callId: call.callId, error: { code: serviceError.code, message: serviceError.message, details: serviceError.details } };
    } finally {
      this.#serving.delete(call.callId);
    }
    await this.#opts.store.bus.publish(`vm:reply:${call.replyTo}`, reply).catch(() => undefined);
  }

  #onReply(reply: RemoteReply): void {
    const pending = this.#remote.get(reply.callId);
    if (!pending) return; // timed out here already
    if (reply.error) {
      const code = (reply.error.code in ERROR_CODES ? reply.error.code : "BAD_GATEWAY") as keyof typeof ERROR_CODES;
      pending.reject(new ServiceError(code, reply.error.message, { details: reply.error.details }));
    } else pending.resolve(reply.result ?? { content: [] });
  }

  #tick(): void {
    for (const conn of [...this.#local.values()]) {
      if (!conn.seen) {
        this.#opts.log.info({ event: "vm.heartbeat_missed", vmId: conn.vmId, connectionId: conn.id });
        conn.close(
          1006,
          "heartbeat",
          new ServiceError("BAD_GATEWAY", `VM ${conn.vmId} stopped answering heartbeats`, {
            details: { vmId: conn.vmId, reason: "vm_dead" },
          }),
        );
        this.detach(conn, CLOSE.heartbeat);
        continue;
      }
      conn.seen = false;
      conn.ping();
    }
    void this.#renewPlaces([...this.#local.values()]).catch((error: unknown) =>
      this.#opts.log.error({ event: "vm.quota_renew_failed", error: String(error) }),
    );
    if (this.shared) {
      // Records of an instance that died without cleaning up drop out once its liveness key expires.
      this.directory.invalidate();
      void this.directory.markAlive().catch(() => undefined);
    }
  }
}
