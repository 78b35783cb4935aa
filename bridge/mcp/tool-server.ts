import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv-provider.js";
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  RootsListChangedNotificationSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type CallToolResult,
  type CompleteResult,
  type GetPromptResult,
  type LoggingLevel,
  type Prompt,
  type ReadResourceResult,
  type Resource,
  type ResourceTemplate,
  type ServerCapabilities,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import type { Principal } from "../../rpc/auth.js";
import type { AnyMethod, MethodParams, MethodResult, ProgressUpdate } from "../../rpc/define.js";
import { callFacts, type Dispatcher } from "../../rpc/dispatcher.js";
import {
  bridgeMcpCompletionComplete,
  bridgeMcpPromptsGet,
  bridgeMcpPromptsList,
  bridgeMcpResourcesList,
  bridgeMcpResourcesRead,
  bridgeMcpResourcesSubscribe,
  bridgeMcpResourcesTemplates,
  bridgeMcpResourcesUnsubscribe,
  bridgeMcpToolsCall,
  bridgeMcpToolsList,
} from "../../rpc/tools/methods.js";
import type { McpObject, McpOffers } from "../../rpc/tools/ports.js";
import type { ToolDef, ToolResult } from "../../rpc/tools/types.js";
import { renderError } from "../../rpc/surfaces.js";
import type { ClientRelay } from "../../rpc/tools/types.js";
import { clientRelay } from "./client-relay.js";
import { loggingLevelOf, setLoggingLevelOf } from "./sdk-internals.js";
import { clientSession, type ClientSessionLink } from "../upstream/client-session.js";

/**
 * One JSON Schema validator for every MCP server of the process: the SDK builds a new Ajv
 * instance per `Server` otherwise, which a stateless request (one server each) paid every time.
 */
const schemaValidator = new AjvJsonSchemaValidator();

/** tools/list page size; the cursor is an opaque offset into the sorted catalog. */
const PAGE_SIZE = 500;

function toMcpTool(tool: ToolDef): Tool {
  // MCP requires an object schema at the top level; sources that omit `type` still describe objects.
  const inputSchema = { type: "object", ...tool.inputSchema } as Tool["inputSchema"];
  return { name: tool.name, description: tool.description, inputSchema, _meta: { category: tool.category, source: tool.source.kind } };
}

function decodeCursor(cursor: string | undefined): number {
  if (cursor === undefined) return 0;
  const offset = Number(Buffer.from(cursor, "base64url").toString("utf8"));
  if (!Number.isInteger(offset) || offset < 0) throw new McpError(ErrorCode.InvalidParams, "Invalid cursor");
  return offset;
}

/** One page of a list gathered from every source; the cursor is an opaque offset into it. */
function pageOf<T>(items: T[], cursor: string | undefined): { page: T[]; nextCursor?: string } {
  const offset = decodeCursor(cursor);
  const next = offset + PAGE_SIZE < items.length ? Buffer.from(String(offset + PAGE_SIZE)).toString("base64url") : undefined;
  return { page: items.slice(offset, offset + PAGE_SIZE), ...(next ? { nextCursor: next } : {}) };
}

/** The codec's methods: each takes `server`, the upstream server of a server's own endpoint. */
type CodecMethod = AnyMethod & { readonly "~types"?: { readonly params: { server?: string } } };

/**
 * What an upstream server, a VM or a built-in tool sent (rpc/tools/ports.ts `McpObject`,
 * rpc/tools/types.ts `ToolResult`), relayed to the client as it came: its MCP type is the
 * sender's promise, not checked on the way through.
 */
function relayed<T>(value: McpObject | McpObject[] | ToolResult): T {
  return value as unknown as T;
}

/** MCP 2025-11-25: a resource that does not exist is -32002. */
const RESOURCE_NOT_FOUND = -32002;

/** What one MCP server serves: the whole catalog, or one upstream server's own view. */
export interface McpServerOptions {
  /** `/bridge/mcp/servers/{name}/`: that upstream server only, with its own names. */
  upstream?: string;
  /** Declared only when a source the caller sees offers them (`bridge.mcp.capabilities`). */
  offers: McpOffers;
  /**
   * The session's client declared sampling, elicitation or roots: what it asks is served in
   * its context, so upstream servers answer it on an upstream session of its own
   * (docs/mcp.md "Upstream sessions").
   */
  link?: () => ClientSessionLink | undefined;
  /** `logging/setLevel` of the session, forwarded to its upstream sessions. */
  onSetLevel?: (sessionId: string, level: LoggingLevel) => Promise<void>;
  /** `notifications/roots/list_changed` of the session's client. */
  onRootsChanged?: (sessionId: string) => void;
}

/** Runs `work` in the context of the session's client when it has a link (see McpServerOptions.link). */
function inSession<T>(options: McpServerOptions | undefined, work: () => T): T {
  const link = options?.link?.();
  return link ? clientSession.run(link, work) : work();
}

/** Who is calling in the HTTP request being served, as the endpoint admitted them. */
export interface McpCaller {
  principal: Principal;
  requestId: string;
}

/**
 * One MCP server per session, a codec over registry methods: tools/list is
 * `bridge.mcp.tools.list`, tools/call is `bridge.mcp.tools.call`, both through the dispatcher
 * with the caller the endpoint admitted for this request. The low-level `Server` takes JSON
 * Schemas as they come from built-ins, upstream servers and VMs.
 */
export function createToolServer(
  dispatcher: Dispatcher,
  caller: () => McpCaller,
  options: McpServerOptions = { offers: { resources: false, prompts: false, subscribe: false, completions: false } },
): Server {
  const { upstream, offers } = options;
  // Every codec method takes the upstream server of a server's own endpoint.
  const call = <K extends CodecMethod>(
    method: K,
    params: MethodParams<K>,
    signal: AbortSignal,
    onProgress?: (update: ProgressUpdate) => void,
    relay?: ClientRelay,
  ) => {
    const { principal, requestId } = caller();
    return inSession(options, () =>
      dispatcher.call(
        method,
        upstream === undefined ? params : { ...params, server: upstream },
        callFacts({ requestId, surface: "bridge", transport: "mcp", authenticated: principal, signal, onProgress, relay }),
      ),
    );
  };
  // logging: the SDK answers logging/setLevel per session and filters sendLoggingMessage by it.
  const capabilities: ServerCapabilities = { tools: { listChanged: true }, logging: {} };
  // list_changed of the servers' resources and prompts are relayed to the sessions that see them.
  if (offers.resources) capabilities.resources = { listChanged: true, ...(offers.subscribe ? { subscribe: true } : {}) };
  if (offers.prompts) capabilities.prompts = { listChanged: true };
  if (offers.completions) capabilities.completions = {};
  const server = new Server(
    upstream === undefined
      ? { name: "chat-agent-tool-gateway", title: "Tool bridge", version: "0.1.0" }
      : { name: `chat-agent-tool-gateway/${upstream}`, title: `MCP server ${upstream} through the tool bridge`, version: "0.1.0" },
    {
      capabilities,
      jsonSchemaValidator: schemaValidator,
      instructions:
        upstream === undefined
          ? "Tools of the gateway's catalog: built-ins, upstream MCP servers (`<server>__<tool>`) and connected VM agents (`vm__<vmId>__<tool>`)."
          : `The tools, resources and prompts of the MCP server ${upstream}, with their own names.`,
    },
  );

  /** Errors of resources and prompts requests as JSON-RPC errors (they have no result form). */
  const protocolError = (thrown: unknown, notFound: number): never => {
    const { error } = renderError("bridge", thrown, caller().requestId, dispatcher.ports.log);
    if (error.code === "INTERNAL") throw new McpError(ErrorCode.InternalError, "Internal error");
    if (error.code === "NOT_FOUND") throw new McpError(notFound, error.message, error.details);
    const upstreamCode = (error.details as { upstreamCode?: number } | undefined)?.upstreamCode;
    throw new McpError(typeof upstreamCode === "number" ? upstreamCode : ErrorCode.InternalError, error.message);
  };
  const forward = async <K extends CodecMethod>(
    method: K,
    params: MethodParams<K>,
    signal: AbortSignal,
    notFound: number,
  ): Promise<MethodResult<K>> => {
    try {
      return await call(method, params, signal);
    } catch (thrown) {
      return protocolError(thrown, notFound);
    }
  };

  // The SDK's own handler keeps the level per session (it filters sendLoggingMessage by it);
  // the level also goes to the session's upstream sessions, which then log at it.
  server.setRequestHandler(SetLevelRequestSchema, async (request, extra) => {
    setLoggingLevelOf(server, extra.sessionId, request.params.level);
    if (extra.sessionId) await options.onSetLevel?.(extra.sessionId, request.params.level);
    return {};
  });
  server.setNotificationHandler(RootsListChangedNotificationSchema, () => {
    const id = options.link?.()?.id;
    if (id) options.onRootsChanged?.(id);
  });

  server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
    const tools = await call(bridgeMcpToolsList, {}, extra.signal);
    const { page, nextCursor } = pageOf(tools, request.params?.cursor);
    return { tools: page.map(toMcpTool), ...(nextCursor ? { nextCursor } : {}) };
  });

  if (offers.resources) {
    server.setRequestHandler(ListResourcesRequestSchema, async (request, extra) => {
      const resources = await forward(bridgeMcpResourcesList, {}, extra.signal, ErrorCode.InvalidParams);
      const { page, nextCursor } = pageOf(relayed<Resource[]>(resources), request.params?.cursor);
      return { resources: page, ...(nextCursor ? { nextCursor } : {}) };
    });
    server.setRequestHandler(ListResourceTemplatesRequestSchema, async (request, extra) => {
      const templates = await forward(bridgeMcpResourcesTemplates, {}, extra.signal, ErrorCode.InvalidParams);
      const { page, nextCursor } = pageOf(relayed<ResourceTemplate[]>(templates), request.params?.cursor);
      return { resourceTemplates: page, ...(nextCursor ? { nextCursor } : {}) };
    });
    server.setRequestHandler(ReadResourceRequestSchema, async (request, extra) =>
      relayed<ReadResourceResult>(await forward(bridgeMcpResourcesRead, { uri: request.params.uri }, extra.signal, RESOURCE_NOT_FOUND)),
    );
  }

  if (offers.resources && offers.subscribe) {
    // A subscription belongs to a session: its updates arrive on the session's GET stream.
    for (const [schema, verb, method] of [
      [SubscribeRequestSchema, "subscribe", bridgeMcpResourcesSubscribe],
      [UnsubscribeRequestSchema, "unsubscribe", bridgeMcpResourcesUnsubscribe],
    ] as const) {
      server.setRequestHandler(schema, async (request, extra) => {
        if (!extra.sessionId) throw new McpError(ErrorCode.InvalidRequest, `resources/${verb} needs a session: initialize first`);
        return forward(method, { uri: request.params.uri, subscriber: extra.sessionId }, extra.signal, RESOURCE_NOT_FOUND);
      });
    }
  }

  if (offers.prompts) {
    server.setRequestHandler(ListPromptsRequestSchema, async (request, extra) => {
      const prompts = await forward(bridgeMcpPromptsList, {}, extra.signal, ErrorCode.InvalidParams);
      const { page, nextCursor } = pageOf(relayed<Prompt[]>(prompts), request.params?.cursor);
      return { prompts: page, ...(nextCursor ? { nextCursor } : {}) };
    });
    server.setRequestHandler(GetPromptRequestSchema, async (request, extra) =>
      relayed<GetPromptResult>(
        await forward(
          bridgeMcpPromptsGet,
          { name: request.params.name, arguments: request.params.arguments ?? {} },
          extra.signal,
          ErrorCode.InvalidParams,
        ),
      ),
    );
  }

  if (offers.completions) {
    // An unknown ref (or one of a server the caller does not see) is -32602, as the SDK's own servers answer.
    server.setRequestHandler(CompleteRequestSchema, async (request, extra) =>
      relayed<CompleteResult>(
        await forward(
          bridgeMcpCompletionComplete,
          {
            ref: request.params.ref,
            argument: request.params.argument,
            ...(request.params.context ? { context: request.params.context } : {}),
          },
          extra.signal,
          ErrorCode.InvalidParams,
        ),
      ),
    );
  }

  server.setRequestHandler(CallToolRequestSchema, (request, extra): Promise<CallToolResult> => {
    const progressToken = request.params._meta?.progressToken;
    // The client's progressToken: the upstream server's progress comes back under it, on this
    // request's SSE stream (the transport answers a request asking for progress with one).
    const onProgress =
      progressToken === undefined
        ? undefined
        : (update: ProgressUpdate) =>
            void extra.sendNotification({ method: "notifications/progress", params: { ...update, progressToken } }).catch(() => undefined);
    return inSession(options, () => runToolCall(dispatcher, caller, upstream, server, request.params, extra as never, onProgress));
  });

  return server;
}

/** What a tools/call runs with: its signal, session, and the way to send requests to the client. */
export type ToolCallExtra = Parameters<typeof clientRelay>[1];

/**
 * One `tools/call` as `bridge.mcp.tools.call`, its failures mapped as MCP wants them: shared
 * by the SDK `Server`'s handler and the endpoint's direct answer of plain JSON calls
 * (bridge/mcp/endpoint.ts), so both give the same result for the same call.
 */
export async function runToolCall(
  dispatcher: Dispatcher,
  caller: () => McpCaller,
  upstream: string | undefined,
  server: Server | undefined,
  params: { name: string; arguments?: Record<string, unknown> },
  extra: ToolCallExtra,
  onProgress?: (update: ProgressUpdate) => void,
): Promise<CallToolResult> {
  const { name, arguments: args } = params;
  const started = performance.now();
  // The gateway's own messages (logger "gateway"), delivered on the session's GET stream.
  // The per-call `debug` note only for a session that asked for debug (logging/setLevel): by
  // default it would cost a stream write per call nobody reads (docs/mcp.md "Logging").
  const note = (level: "debug" | "warning" | "error", data: Record<string, unknown>) => {
    if (level === "debug" && loggingLevelOf(server, extra.sessionId) !== "debug") return;
    if (extra.sessionId && server)
      void server
        .sendLoggingMessage(
          { level, logger: "gateway", data: { tool: name, durationMs: Math.round(performance.now() - started), ...data } },
          extra.sessionId,
        )
        .catch(() => undefined);
  };
  const { principal, requestId } = caller();
  try {
    // The upstream server's sampling, elicitation and roots requests during the call go to this client.
    const relay = clientRelay(server, extra);
    const result = await dispatcher.call(
      bridgeMcpToolsCall,
      upstream === undefined ? { name, arguments: args ?? {} } : { name, arguments: args ?? {}, server: upstream },
      callFacts({ requestId, surface: "bridge", transport: "mcp", authenticated: principal, signal: extra.signal, onProgress, relay }),
    );
    note(result.isError ? "warning" : "debug", { message: result.isError ? "tool answered with an error" : "tool call finished" });
    return relayed<CallToolResult>(result);
  } catch (thrown) {
    // Masked and logged like every transport's errors.
    const { error } = renderError("bridge", thrown, requestId, dispatcher.ports.log);
    note("error", { message: error.message, code: error.code });
    if (error.code === "INTERNAL") throw new McpError(ErrorCode.InternalError, "Internal error");
    // MCP 2025-11-25 "Error Handling": an unknown tool is a protocol error (-32602) ...
    if (error.code === "NOT_FOUND") throw new McpError(ErrorCode.InvalidParams, error.message);
    // ... while bad arguments and failures of the tool itself are results the model can read.
    const issues = error.code === "VALIDATION_FAILED" ? (error.details as { issues?: unknown[] } | undefined)?.issues : undefined;
    return {
      content: [{ type: "text", text: error.message }],
      isError: true,
      structuredContent: { error: { code: error.code, message: error.message, ...(issues ? { issues } : {}) } },
    };
  }
}
