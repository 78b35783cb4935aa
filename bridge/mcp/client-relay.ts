import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CreateMessageResultSchema,
  CreateMessageResultWithToolsSchema,
  ElicitResultSchema,
  ErrorCode,
  ListRootsResultSchema,
  type ClientCapabilities,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import type { ClientRelay, ClientRequest } from "../../rpc/tools/types.js";
import type { ClientSessionLink } from "../upstream/client-session.js";
import { loggingLevelOf } from "./sdk-internals.js";

/**
 * A JSON-RPC error for the upstream server: the SDK sends `code` and `message` of what a
 * handler throws (an McpError would add its "MCP error <code>:" prefix to the message).
 */
export function rpcError(code: number, message: string): Error & { code: number } {
  return Object.assign(new Error(message.replace(/^(MCP error -?\d+: )+/, "")), { code });
}

/** The part of the SDK's RequestHandlerExtra a relay needs: the tools/call it belongs to. */
export interface CallExtra {
  sessionId?: string;
  signal: AbortSignal;
  sendRequest: (request: ServerRequest, schema: never, options?: { signal?: AbortSignal; timeout?: number }) => Promise<unknown>;
}

/** The capability a client must have declared for an upstream server's request (MCP "Client features"). */
function capabilityOf(request: ClientRequest): { name: string; declared: (capabilities: ClientCapabilities) => boolean } {
  switch (request.method) {
    case "sampling/createMessage":
      // `tools` in a sampling request needs `sampling.tools` (MCP 2025-11-25).
      return request.params?.tools
        ? { name: "sampling.tools", declared: (c) => Boolean(c.sampling?.tools) }
        : { name: "sampling", declared: (c) => Boolean(c.sampling) };
    case "elicitation/create":
      // An empty `elicitation: {}` means form mode (MCP 2025-11-25 "Elicitation").
      return request.params?.mode === "url"
        ? { name: "elicitation.url", declared: (c) => Boolean(c.elicitation?.url) }
        : { name: "elicitation", declared: (c) => Boolean(c.elicitation && (c.elicitation.form || !c.elicitation.url)) };
    case "roots/list":
      return { name: "roots", declared: (c) => Boolean(c.roots) };
  }
}

/** Whether a client declared anything an upstream server may ask it during a call. */
export function declaresClientFeatures(capabilities: ClientCapabilities | undefined): boolean {
  return Boolean(capabilities && (capabilities.sampling || capabilities.elicitation || capabilities.roots));
}

function resultSchema(request: ClientRequest) {
  if (request.method === "sampling/createMessage")
    return request.params?.tools ? CreateMessageResultWithToolsSchema : CreateMessageResultSchema;
  return request.method === "elicitation/create" ? ElicitResultSchema : ListRootsResultSchema;
}

/**
 * The relay of one `tools/call`: an upstream server's `sampling/createMessage`,
 * `elicitation/create` or `roots/list` during the call is sent to the client session that
 * made it, as a request related to that call (on the call's SSE answer), and the client's
 * answer (or error) goes back to the server. Refused with `-32601` and a message saying why
 * when the call came without a session (plain JSON-RPC: nobody to ask) or the client did not
 * declare the capability.
 */
export function clientRelay(server: Server | undefined, extra: CallExtra): ClientRelay {
  return async (request, { signal, timeoutMs }) => {
    const capability = capabilityOf(request);
    if (!extra.sessionId) {
      throw rpcError(
        ErrorCode.MethodNotFound,
        `${request.method} cannot be relayed: the tools/call came as plain JSON-RPC without an MCP session, so there is no client to ask`,
      );
    }
    if (!capability.declared(server?.getClientCapabilities() ?? {})) {
      throw rpcError(
        ErrorCode.MethodNotFound,
        `${request.method} refused: the MCP client that made this call did not declare the ${capability.name} capability`,
      );
    }
    // The client's own error goes back to the server with its code and message.
    // Aborted when the server cancels its request or the client's call ends (listeners removed after).
    const controller = new AbortController();
    const abort = () => controller.abort();
    for (const source of [signal, extra.signal]) {
      if (source.aborted) abort();
      else source.addEventListener("abort", abort, { once: true });
    }
    try {
      const result = await extra.sendRequest(
        { method: request.method, params: request.params ?? {} } as ServerRequest,
        resultSchema(request) as never,
        {
          signal: controller.signal,
          timeout: timeoutMs,
        },
      );
      return result as Record<string, unknown>;
    } catch (thrown) {
      const error = thrown as Error & { code?: unknown };
      throw rpcError(typeof error.code === "number" ? error.code : ErrorCode.InternalError, error.message);
    } finally {
      for (const source of [signal, extra.signal]) source.removeEventListener("abort", abort);
    }
  };
}

/** How long a request of an upstream server waits for the client's GET stream to open. */
const STREAM_WAIT_STEP_MS = 25;

/** What a session link needs of the session it belongs to. */
export interface LinkedSession {
  id: string;
  userId: string;
  /** `/bridge/mcp/servers/{name}/`: log messages keep the server's own logger names. */
  upstream?: string;
  /** The client holds its GET stream open (requests and notifications not tied to a call go there). */
  streamOpen: boolean;
}

/**
 * The link of a client session that declared sampling, elicitation or roots
 * (bridge/upstream/client-session.ts): what its upstream sessions need of it. An upstream
 * server's request not tied to one of the client's calls goes on the client's GET stream
 * (MCP Streamable HTTP "Listening for Messages from the Server"), waiting for the stream to
 * open within the request's bound; its answer or error goes back to the server.
 */
export function sessionLink(
  server: Server,
  session: LinkedSession,
  forward: (notification: ServerNotification) => void = () => undefined,
): ClientSessionLink {
  const capabilities = server.getClientCapabilities() ?? {};
  return {
    id: session.id,
    userId: session.userId,
    capabilities,
    clientInfo: server.getClientVersion() ?? { name: "mcp-client", version: "0" },
    loggingLevel: () => loggingLevelOf(server, session.id),
    async request(request, { signal, timeoutMs }) {
      const capability = capabilityOf(request);
      if (!capability.declared(capabilities)) {
        throw rpcError(
          ErrorCode.MethodNotFound,
          `${request.method} refused: the MCP client did not declare the ${capability.name} capability`,
        );
      }
      const deadline = Date.now() + timeoutMs;
      while (!session.streamOpen) {
        if (signal.aborted) throw rpcError(ErrorCode.InternalError, "Request cancelled");
        if (Date.now() >= deadline)
          throw rpcError(
            ErrorCode.InternalError,
            `${request.method} could not reach the MCP client: it holds no GET stream open for requests outside its calls`,
          );
        await new Promise((resolve) => setTimeout(resolve, STREAM_WAIT_STEP_MS));
      }
      try {
        const result = await server.request(
          { method: request.method, params: request.params ?? {} } as ServerRequest,
          resultSchema(request) as never,
          {
            signal,
            timeout: Math.max(1, deadline - Date.now()),
          },
        );
        return result as Record<string, unknown>;
      } catch (thrown) {
        const error = thrown as Error & { code?: unknown };
        throw rpcError(typeof error.code === "number" ? error.code : ErrorCode.InternalError, error.message);
      }
    },
    log(source, params) {
      // The catalog endpoint names loggers `<server>/<logger>`; a server's own endpoint keeps its names.
      const logger = session.upstream !== undefined ? params.logger : params.logger ? `${source}/${params.logger}` : source;
      if (!session.streamOpen) {
        // The client's stream is on another instance (or none): the message goes there, if anywhere.
        forward({
          method: "notifications/message",
          params: { level: params.level, ...(logger === undefined ? {} : { logger }), data: params.data },
        });
        return;
      }
      void server
        .sendLoggingMessage({ level: params.level, ...(logger === undefined ? {} : { logger }), data: params.data }, session.id)
        .catch(() => undefined);
    },
  };
}
