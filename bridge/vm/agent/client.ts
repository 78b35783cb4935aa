import WebSocket from "ws";
import { JSONRPCClient, JSONRPCErrorException, JSONRPCServer, JSONRPCServerAndClient } from "json-rpc-2.0";
import { ToolFailure, type LocalTool } from "./local-tools.js";

/** A resource the agent serves (`resources/read`), announced with its tools. */
export interface LocalResource {
  uri: string;
  name: string;
  description?: string;
  mimeType?: string;
  read(signal: AbortSignal): Promise<{ contents: ({ uri: string; mimeType?: string } & ({ text: string } | { blob: string }))[] }>;
}

/** A prompt the agent serves (`prompts/get`), announced with its tools. */
export interface LocalPrompt {
  name: string;
  description?: string;
  arguments?: { name: string; description?: string; required?: boolean }[];
  get(
    args: Record<string, string>,
  ): Promise<{ description?: string; messages: { role: "user" | "assistant"; content: Record<string, unknown> }[] }>;
}

export interface AgentOptions {
  /** `ws(s)://…/bridge/agents/<agentId>/ws?vmId=…` */
  url: string;
  key: string;
  tools: LocalTool[];
  /** Resources and prompts, federated into the owning tenant's MCP catalog (docs/vm-agents.md). */
  resources?: LocalResource[];
  prompts?: LocalPrompt[];
  log: (message: string) => void;
  /** First reconnect delay; doubles up to maxBackoffMs, with jitter. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

/** Refusals that retrying cannot fix. */
const FATAL_STATUSES = new Set([400, 401, 403]);

/**
 * The VM side of the bridge protocol (docs/vm-agents.md): connects, announces its tools with
 * `tools/register`, answers `tools/call` and `ping`, and reconnects with exponential backoff
 * until `stop()`.
 */
export class VmAgent {
  #ws: WebSocket | undefined;
  #stopped = false;
  #attempt = 0;
  #retryTimer: NodeJS.Timeout | undefined;
  // The server param of a call is its AbortSignal (tools/call), aborted by the bridge's notifications/cancelled.
  readonly #server = new JSONRPCServer<AbortSignal | undefined>({ errorListener: () => undefined });
  /** tools/call requests running, by JSON-RPC id. */
  readonly #running = new Map<string | number, AbortController>();
  readonly #done: Promise<void>;
  #resolveDone!: () => void;
  #rejectDone!: (error: Error) => void;

  constructor(private readonly options: AgentOptions) {
    this.#done = new Promise((resolve, reject) => {
      this.#resolveDone = resolve;
      this.#rejectDone = reject;
    });
    const byName = new Map(options.tools.map((tool) => [tool.name, tool]));
    this.#server.addMethod("ping", () => ({}));
    this.#server.addMethod("tools/call", async (params: { name?: string; arguments?: Record<string, unknown> }, signal) => {
      const tool = byName.get(String(params?.name));
      if (!tool) throw new JSONRPCErrorException(`Unknown tool: ${String(params?.name)}`, -32602);
      try {
        return await tool.run(params.arguments ?? {}, signal ?? new AbortController().signal);
      } catch (error) {
        // MCP: a tool's own failure is a result with isError, so the model can read it.
        if (error instanceof ToolFailure) return { content: [{ type: "text", text: error.message }], isError: true };
        throw new JSONRPCErrorException(`${tool.name} failed: ${(error as Error).message}`, -32603);
      }
    });
    const resources = new Map((options.resources ?? []).map((resource) => [resource.uri, resource]));
    const prompts = new Map((options.prompts ?? []).map((prompt) => [prompt.name, prompt]));
    this.#server.addMethod("resources/read", async (params: { uri?: string }, signal) => {
      const resource = resources.get(String(params?.uri));
      if (!resource) throw new JSONRPCErrorException(`Unknown resource: ${String(params?.uri)}`, -32002);
      return resource.read(signal ?? new AbortController().signal);
    });
    this.#server.addMethod("prompts/get", async (params: { name?: string; arguments?: Record<string, string> }) => {
      const prompt = prompts.get(String(params?.name));
      if (!prompt) throw new JSONRPCErrorException(`Unknown prompt: ${String(params?.name)}`, -32602);
      return prompt.get(params.arguments ?? {});
    });
    // The bridge gave up on a call (timeout, the caller cancelled or went away): the tool's
    // signal aborts, and no answer is sent (MCP "Cancellation").
    this.#server.addMethod("notifications/cancelled", (params: { requestId?: string | number; reason?: string }) => {
      if (params?.requestId !== undefined)
        this.#running.get(params.requestId)?.abort(new Error(params.reason ?? "cancelled by the bridge"));
      return null;
    });
  }

  /** Calls running now (tools/call requests not yet answered or cancelled). */
  get running(): number {
    return this.#running.size;
  }

  /** Resolves when stopped; rejects on a refusal that retrying cannot fix (bad key, bad vmId). */
  run(): Promise<void> {
    this.#connect();
    return this.#done;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retryTimer);
    if (!this.#ws || this.#ws.readyState === WebSocket.CLOSED) {
      this.#resolveDone();
      return;
    }
    this.#ws.close(1000, "agent stopping");
  }

  #connect(): void {
    const ws = new WebSocket(this.options.url, ["vm-agent.v1"], { headers: { authorization: `Bearer ${this.options.key}` } });
    this.#ws = ws;
    const client = new JSONRPCClient((payload) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(payload));
    });
    const rpc = new JSONRPCServerAndClient<AbortSignal | undefined, void>(this.#server, client, { errorListener: () => undefined });

    ws.on("unexpected-response", (_req, res) => {
      const status = res.statusCode ?? 0;
      res.resume();
      if (FATAL_STATUSES.has(status)) {
        this.#stopped = true;
        this.#rejectDone(new Error(`The bridge refused the connection with ${status}; check --key and --vm-id`));
      } else this.options.log(`bridge answered ${status}; retrying`);
      ws.terminate();
    });
    ws.on("open", async () => {
      this.#attempt = 0;
      this.options.log(`connected to ${this.options.url.replace(/\?.*/, "")}`);
      try {
        const tools = this.options.tools.map(({ name, description, category, inputSchema }) => ({
          name,
          description,
          category,
          inputSchema,
        }));
        const resources = (this.options.resources ?? []).map(({ read: _read, ...announced }) => announced);
        const prompts = (this.options.prompts ?? []).map(({ get: _get, ...announced }) => announced);
        const registered = (await rpc.request("tools/register", {
          tools,
          ...(resources.length ? { resources } : {}),
          ...(prompts.length ? { prompts } : {}),
        })) as { tools: string[] };
        this.options.log(`registered ${registered.tools.length} tools: ${registered.tools.join(", ")}`);
      } catch (error) {
        this.options.log(`tools/register failed: ${(error as Error).message}`);
      }
    });
    ws.on("message", (data) => {
      let payload: unknown;
      try {
        payload = JSON.parse(data.toString());
      } catch {
        return;
      }
      const call = payload as { method?: unknown; id?: unknown };
      if (
        (call?.method === "tools/call" || call?.method === "resources/read" || call?.method === "prompts/get") &&
        (typeof call.id === "string" || typeof call.id === "number")
      ) {
        const id = call.id;
        const controller = new AbortController();
        this.#running.set(id, controller);
        void this.#server.receive(payload as never, controller.signal).then(
          (response) => {
            this.#running.delete(id);
            if (response && !controller.signal.aborted && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(response));
          },
          () => this.#running.delete(id),
        );
        return;
      }
      rpc.receiveAndSend(payload, undefined).catch(() => undefined);
    });
    ws.on("error", (error) => this.options.log(`socket error: ${error.message}`));
    ws.on("close", (code, reason) => {
      rpc.rejectAllPendingRequests("connection closed");
      // Nobody waits for the answers of this socket's calls any more.
      for (const controller of this.#running.values()) controller.abort(new Error("connection closed"));
      this.#running.clear();
      if (this.#stopped) return this.#resolveDone();
      const min = this.options.minBackoffMs ?? 500;
      const delay = Math.min(this.options.maxBackoffMs ?? 30_000, min * 2 ** this.#attempt++) * (0.75 + Math.random() * 0.5);
      this.options.log(`disconnected (${code}${reason.length ? ` ${reason.toString()}` : ""}); reconnecting in ${Math.round(delay)} ms`);
      this.#retryTimer = setTimeout(() => this.#connect(), delay);
    });
  }
}
