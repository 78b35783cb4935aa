import type { H3 } from "h3";
import type { Dispatcher } from "../../rpc/dispatcher.js";

/** A transport that is not a registry binding (MCP endpoint, WebSocket upgrades): mounts its routes on the app. */
export type Transport = (app: H3, dispatcher: Dispatcher) => void;
