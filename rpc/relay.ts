/** A request an upstream MCP server sends its client during a call (MCP "Client features"). */
export interface ClientRequest {
  method: "sampling/createMessage" | "elicitation/create" | "roots/list";
  params?: Record<string, unknown>;
}

/**
 * Relays a server-to-client request to the MCP client session that made the call, and
 * resolves with its answer; rejects (MCP error) when the client cannot be asked: no session
 * (plain JSON-RPC), or the client did not declare the capability.
 */
export type ClientRelay = (request: ClientRequest, options: { signal: AbortSignal; timeoutMs: number }) => Promise<Record<string, unknown>>;
