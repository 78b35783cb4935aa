import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CreateMessageResultSchema,
  CreateMessageResultWithToolsSchema,
  ElicitResultSchema,
  ErrorCode,
  ListRootsResultSchema,
  type ClientCapabilities,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import type { ClientRelay, ClientRequest } from "../../rpc/tools/types.js";

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
  if (request.method === "sampling/createMessage") return request.params?.tools ? CreateMessageResultWithToolsSchema : CreateMessageResultSchema;
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
      throw rpcError(ErrorCode.MethodNotFound, `${request.method} cannot be relayed: the tools/call came as plain JSON-RPC without an MCP session, so there is no client to ask`);
    }
    if (!capability.declared(server?.getClientCapabilities() ?? {})) {
      throw rpcError(ErrorCode.MethodNotFound, `${request.method} refused: the MCP client that made this call did not declare the ${capability.name} capability`);
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
      const result = await extra.sendRequest({ method: request.method, params: request.params ?? {} } as ServerRequest, resultSchema(request) as never, {
        signal: controller.signal,
        timeout: timeoutMs,
      });
      return result as Record<string, unknown>;
    } catch (thrown) {
      const error = thrown as Error & { code?: unknown };
      throw rpcError(typeof error.code === "number" ? error.code : ErrorCode.InternalError, error.message);
    } finally {
      for (const source of [signal, extra.signal]) source.removeEventListener("abort", abort);
    }
  };
}
