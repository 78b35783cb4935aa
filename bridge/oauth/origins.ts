import type { IncomingMessage } from "node:http";
import type { H3Event } from "h3";
import type { Config } from "../../rpc/config.js";

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** The Node request under an h3 event (the service runs on Node: facade/server.ts). */
export function nodeRequestOf(event: H3Event): IncomingMessage {
  const req = (event.runtime as { node?: { req?: IncomingMessage } } | undefined)?.node?.req;
  if (!req) throw new Error("The authorization server runs on Node only");
  return req;
}

/** The origin of the address the service listens on, from the socket a request came in on. */
function listeningOrigin(config: Pick<Config, "HOST">, req: IncomingMessage): string {
  const bound = config.HOST === "0.0.0.0" || config.HOST === "::" ? (req.socket.localAddress ?? "127.0.0.1") : config.HOST;
  const host = bound.replace(/^::ffff:/, "");
  return `http://${host.includes(":") ? `[${host}]` : host}:${req.socket.localPort}`;
}

/**
 * The authorization server's issuer (RFC 8414): PUBLIC_URL's origin, or without it the address
 * the service listens on, so that every token and metadata document of a deployment names the
 * same issuer whatever `Host` a client used (docs/mcp.md "Authorization server").
 */
export function issuerOf(config: Pick<Config, "PUBLIC_URL" | "HOST">, req: IncomingMessage): string {
  return config.PUBLIC_URL ? new URL(config.PUBLIC_URL).origin : listeningOrigin(config, req);
}

/**
 * The origins whose MCP endpoints this deployment serves, for resource indicators: PUBLIC_URL's
 * origin when set, else any loopback name on the port the service listens on.
 */
export function servedOrigins(config: Pick<Config, "PUBLIC_URL">, req: IncomingMessage): (origin: string) => boolean {
  if (config.PUBLIC_URL) {
    const published = new URL(config.PUBLIC_URL).origin;
    return (origin) => origin === published;
  }
  const port = String(req.socket.localPort);
  return (origin) => {
    const url = new URL(origin);
    return url.protocol === "http:" && url.port === port && LOOPBACK_NAMES.has(url.hostname);
  };
}
