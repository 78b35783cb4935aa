import { AsyncLocalStorage } from "node:async_hooks";
import type { ClientCapabilities, Implementation, LoggingLevel } from "@modelcontextprotocol/sdk/types.js";
import type { ClientRequest } from "../../rpc/tools/types.js";

/**
 * An MCP client session that declared `sampling`, `elicitation` or `roots`, as the upstream
 * servers it reaches see it: each server it uses gets an upstream session of its own carrying
 * the client's capabilities and `clientInfo`, and every request that server makes on it goes
 * to this client (docs/mcp.md "Upstream sessions").
 */
export interface ClientSessionLink {
  /** The client's `Mcp-Session-Id` on the gateway. */
  readonly id: string;
  /** Upstream sessions are bounded per user (MCP_UPSTREAM_SESSIONS_PER_USER). */
  readonly userId: string;
  readonly capabilities: ClientCapabilities;
  readonly clientInfo: Implementation;
  /** The level the client set with `logging/setLevel`, forwarded to its upstream sessions. */
  loggingLevel(): LoggingLevel | undefined;
  /**
   * A request of an upstream server not tied to one of the client's calls: sent on the
   * client's GET stream, its answer (or error) returned.
   */
  request(request: ClientRequest, options: { signal: AbortSignal; timeoutMs: number }): Promise<Record<string, unknown>>;
  /** A log message of one of the client's upstream sessions, for this client only. */
  log(server: string, params: { level: LoggingLevel; logger?: string; data?: unknown }): void;
}

/**
 * The client session a request of the MCP endpoint is served for, in the async context of
 * its dispatch: an upstream connection reads it to pick that client's upstream session.
 * Unset for clients without those capabilities, REST, agents and background work.
 */
export const clientSession = new AsyncLocalStorage<ClientSessionLink>();
