import type { Transport } from "../facade/app.js";
import { mcpTransport } from "./mcp/endpoint.js";
import { vmSocketTransport } from "./vm/socket.js";
import { agentStreamTransport } from "./agent-stream.js";

/**
 * Transports that are not registry methods: the MCP endpoint, VM-agent and agent-stream
 * WebSockets, bridge health. Each is a thin adapter over the dispatcher and the catalog.
 */
export const bridgeTransports: readonly Transport[] = [vmSocketTransport, mcpTransport, agentStreamTransport];
