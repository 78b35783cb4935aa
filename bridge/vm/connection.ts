import { outgoingTraceparent } from "../../rpc/tracing.js";
import { randomUUID } from "node:crypto";
import {
  createJSONRPCErrorResponse,
  isJSONRPCResponse,
  JSONRPCClient,
  JSONRPCServerAndClient,
  type JSONRPCResponse,
  type JSONRPCServer,
} from "json-rpc-2.0";
import { ServiceError } from "../../rpc/errors.js";
import type { Logger } from "../../rpc/log.js";
import type { ToolResult } from "../../rpc/tools/types.js";
import { toToolResult, type VmPrompt, type VmResource, type VmTool } from "./protocol.js";
import type { VmIdentity } from "../../rpc/tools/ports.js";

/** The part of a crossws peer a connection needs (kept small so tests and adapters can supply one). */
export interface VmPeer {
  send(data: string): unknown;
  close(code?: number, reason?: string): void;
  terminate(): void;
}

export interface CallOptions {
  timeoutMs: number;
  signal?: AbortSignal;
}

interface Pending {
  method: string;
  timer?: NodeJS.Timeout;
  detach?: () => void;
  /** Set when the bridge ends the call itself (timeout, abort, disconnect). */
  failure?: ServiceError;
}

/**
 * One connected VM: JSON-RPC 2.0 both ways over one socket (json-rpc-2.0's
 * JSONRPCServerAndClient). The server half is shared by every connection (the connection is
 * its server param), so an idle socket costs one small client and a few fields.
 * Outgoing ids come from one counter; a reply to any other id is logged and dropped.
 */
export class VmConnection {
  /** The connection id the gate chose (the token of the socket's quota place), else a new one. */
  readonly id: string;
  readonly connectedAt = new Date().toISOString();
  tools: VmTool[] = [];
  resources: VmResource[] = [];
  prompts: VmPrompt[] = [];
  /** Heartbeat: anything received since the last tick proves the VM alive. */
  seen = true;
  #closed = false;
  #nextId = 1;
  readonly #pending = new Map<number, Pending>();
  readonly #rpc: JSONRPCServerAndClient<VmConnection, void>;
  readonly #client: JSONRPCClient<void>;

  constructor(
    readonly identity: VmIdentity,
    readonly peer: VmPeer,
    server: JSONRPCServer<VmConnection>,
    private readonly log: Logger,
    private readonly maxPayloadBytes: number,
  ) {
    this.id = identity.connectionId ?? randomUUID();
    this.#client = new JSONRPCClient<void>((payload) => {
      if (!this.#closed) peer.send(JSON.stringify(payload));
    });
    this.#rpc = new JSONRPCServerAndClient(server, this.#client, { errorListener: () => undefined });
  }

  get vmId(): string {
    return this.identity.vmId;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Calls in flight on this socket (heartbeat pings included). */
  get inFlight(): number {
    return this.#pending.size;
  }

  /** Handles one text frame from the VM. Bad input gets a JSON-RPC error; the socket stays up. */
  receive(text: string): void {
    this.seen = true;
    if (text.length > this.maxPayloadBytes) {
      // Normally refused by the socket itself (ws maxPayload, close 1009); this guards other adapters.
      this.#sendError(null, -32013, `Message exceeds the limit of ${this.maxPayloadBytes} bytes`);
      return;
    }
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      this.#sendError(null, -32700, "Parse error: the message is not valid JSON");
      return;
    }
    if (isJSONRPCResponse(payload)) {
      const id = payload.id;
      if (typeof id !== "number" || !this.#pending.has(id)) {
        // A late reply (after a timeout) or a confused VM: nothing waits for it.
        this.log.info({ event: "vm.reply_unknown_id", vmId: this.vmId, id });
        return;
      }
    }
    this.#rpc.receiveAndSend(payload, this, undefined).catch(() => {
      const id = typeof payload === "object" && payload !== null && "id" in payload ? (payload as { id: unknown }).id : null;
      this.#sendError(typeof id === "string" || typeof id === "number" ? id : null, -32600, "Invalid Request: not a JSON-RPC 2.0 message");
    });
  }

  /** Asks the VM to run one of its tools (`tools/call`), bounded by `timeoutMs`. */
  async callTool(name: string, args: Record<string, unknown>, options: CallOptions): Promise<ToolResult> {
    const seconds = Math.round(options.timeoutMs / 100) / 10;
    // The call's span, as MCP carries it: `_meta.traceparent` (docs/observability.md "Traces").
    const traceparent = outgoingTraceparent();
    const response = await this.#request(
      "tools/call",
      traceparent ? { name, arguments: args, _meta: { traceparent } } : { name, arguments: args },
      options,
      () =>
        new ServiceError("TIMEOUT", `VM ${this.vmId} did not answer tools/call ${name} within ${seconds} s`, {
          details: { vmId: this.vmId, tool: name },
        }),
    );
    if (response.error) {
      // docs/interface.md 2.7 / docs/architecture.md "Tools and VMs": a VM's own error is passed on with its message.
      throw new ServiceError("BAD_GATEWAY", `VM ${this.vmId} failed tools/call ${name}: ${response.error.message}`, {
        details: {
          vmId: this.vmId,
          tool: name,
          vmError: { code: response.error.code, message: response.error.message, data: response.error.data },
        },
      });
    }
    return toToolResult(response.result);
  }

  /**
   * `resources/read` or `prompts/get` on the VM, bounded by `timeoutMs`; its answer must be an
   * object with `contents` (read) or `messages` (prompt) arrays, as MCP's results have.
   */
  async ask(
    method: "resources/read" | "prompts/get",
    params: Record<string, unknown>,
    options: CallOptions,
  ): Promise<Record<string, unknown>> {
    const seconds = Math.round(options.timeoutMs / 100) / 10;
    const what = method === "resources/read" ? `resources/read ${String(params.uri)}` : `prompts/get ${String(params.name)}`;
    const response = await this.#request(
      method,
      params,
      options,
      () => new ServiceError("TIMEOUT", `VM ${this.vmId} did not answer ${what} within ${seconds} s`, { details: { vmId: this.vmId } }),
    );
    if (response.error) {
      throw new ServiceError("BAD_GATEWAY", `VM ${this.vmId} failed ${what}: ${response.error.message}`, {
        details: {
          vmId: this.vmId,
          upstreamCode: response.error.code,
          vmError: { code: response.error.code, message: response.error.message },
        },
      });
    }
    const result = response.result as Record<string, unknown> | null;
    const field = method === "resources/read" ? "contents" : "messages";
    if (typeof result !== "object" || result === null || !Array.isArray(result[field])) {
      throw new ServiceError("BAD_GATEWAY", `VM ${this.vmId} answered ${what} without a ${field} array`, { details: { vmId: this.vmId } });
    }
    return result;
  }

  /** Heartbeat probe: the reply (or any other message) marks the VM alive. */
  ping(): void {
    if (this.#closed) return;
    this.#request("ping", {}, {}, () => new ServiceError("TIMEOUT", "ping")).catch(() => undefined);
  }

  /** Closes the socket and fails every call in flight at once (not at its timeout). */
  close(code: number, reason: string, error: ServiceError): void {
    this.#fail(error);
    if (this.#closed) return;
    this.#closed = true;
    try {
      if (code === 1006) this.peer.terminate();
      else this.peer.close(code, reason);
    } catch {
      // already gone
    }
  }

  /** The socket is gone (close hook): fail what is in flight. */
  closedByPeer(error: ServiceError): void {
    this.#closed = true;
    this.#fail(error);
  }

  #fail(error: ServiceError): void {
    for (const [id, pending] of this.#pending) {
      pending.failure ??= error;
      this.#client.receive(createJSONRPCErrorResponse(id, 0, error.message));
    }
    this.#client.rejectAllPendingRequests(error.message);
  }

  async #request(
    method: string,
    params: Record<string, unknown>,
    options: Partial<CallOptions>,
    onTimeout: () => ServiceError,
  ): Promise<JSONRPCResponse> {
    if (this.#closed) throw new ServiceError("UNAVAILABLE", `VM ${this.vmId} is not connected`, { details: { vmId: this.vmId } });
    if (options.signal?.aborted) throw new ServiceError("UNAVAILABLE", "The caller went away before the call started");
    const id = this.#nextId++;
    const pending: Pending = { method };
    this.#pending.set(id, pending);
    const end = (failure: ServiceError) => {
      if (!this.#pending.has(id)) return;
      pending.failure = failure;
      this.#client.receive(createJSONRPCErrorResponse(id, 0, failure.message));
      // MCP-style courtesy: the VM may stop work nobody waits for.
      this.#client.notify("notifications/cancelled", { requestId: id, reason: failure.message });
    };
    if (options.timeoutMs !== undefined) pending.timer = setTimeout(() => end(onTimeout()), options.timeoutMs);
    if (options.signal) {
      const onAbort = () => end(new ServiceError("UNAVAILABLE", "The caller went away"));
      options.signal.addEventListener("abort", onAbort, { once: true });
      pending.detach = () => options.signal!.removeEventListener("abort", onAbort);
    }
    try {
      const response = (await this.#rpc.requestAdvanced({ jsonrpc: "2.0", id, method, params }, undefined)) as JSONRPCResponse;
      if (pending.failure) throw pending.failure;
      return response;
    } finally {
      if (pending.timer) clearTimeout(pending.timer);
      pending.detach?.();
      this.#pending.delete(id);
    }
  }

  #sendError(id: string | number | null, code: number, message: string): void {
    if (this.#closed) return;
    this.peer.send(JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } }));
  }
}
