import type { Transport } from "../facade/transport/mount.js";
import { mcpTransport } from "./mcp/endpoint.js";
import { vmSocketTransport } from "./vm/socket.js";
import { agentStreamTransport } from "./agent-stream/socket.js";
import { oauthTransport } from "./oauth/transport.js";
import type { ToolBridge } from "./tool-bridge.js";

/**
 * Transports that are not registry bindings: the MCP endpoint, VM-agent and agent-stream
 * WebSockets, and the MCP authorization server's protocol endpoints. Each is a thin adapter
 * over the dispatcher and the tool bridge.
 */
export function bridgeTransports(bridge: ToolBridge): readonly Transport[] {
  return [vmSocketTransport(bridge), mcpTransport(bridge), agentStreamTransport, oauthTransport(bridge)];
}
