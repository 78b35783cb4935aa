import { SURFACE_BASES } from "../surfaces.js";

/** The MCP catalog endpoint's resource path (RFC 9728 §1.2: the resource a token is for). */
export const MCP_RESOURCE_PATH = `${SURFACE_BASES.bridge}/mcp`;

/** The scopes of the MCP endpoints (docs/mcp.md "Scopes"): reading the catalog, and calling tools. */
export const MCP_SCOPES = ["mcp:read", "mcp:call"] as const;
export type McpScope = (typeof MCP_SCOPES)[number];

/** An upstream server's name as the registry takes it (docs/mcp.md "Upstream MCP servers"). */
const SERVER_NAME = /^[A-Za-z0-9-]{1,48}$/;

/** The canonical URL of the catalog endpoint, or of one server's own endpoint (docs/mcp.md "Resource indicators"). */
export function mcpResource(origin: string, server?: string): string {
  return server === undefined ? origin + MCP_RESOURCE_PATH : `${origin}${MCP_RESOURCE_PATH}/servers/${server}`;
}

/** What a resource indicator names: the catalog (no server) or one server's endpoint. */
export interface McpResourceTarget {
  /** The indicator in canonical form (lowercase scheme and host, no trailing slash). */
  resource: string;
  origin: string;
  server?: string;
}

/**
 * Reads an RFC 8707 resource indicator as one of the bridge's MCP endpoints, or undefined when
 * it names anything else: another origin than `served` accepts, a query or fragment, another
 * path. A trailing slash and uppercase scheme or host are accepted (MCP 2025-11-25 "Canonical
 * Server URI": servers SHOULD accept them) and canonicalized away.
 */
export function parseMcpResource(indicator: string, served: (origin: string) => boolean): McpResourceTarget | undefined {
  let url: URL;
  try {
    url = new URL(indicator);
  } catch {
    return undefined;
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.search || url.hash || indicator.includes("#")) return undefined;
  if (url.username || url.password || !served(url.origin)) return undefined;
  const path = url.pathname.endsWith("/") ? url.pathname.slice(0, -1) : url.pathname;
  if (path === MCP_RESOURCE_PATH) return { resource: mcpResource(url.origin), origin: url.origin };
  const prefix = `${MCP_RESOURCE_PATH}/servers/`;
  if (!path.startsWith(prefix)) return undefined;
  const server = path.slice(prefix.length);
  if (!SERVER_NAME.test(server)) return undefined;
  return { resource: mcpResource(url.origin, server), origin: url.origin, server };
}

const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * Why a client may not register this redirect URI, or undefined when it may (MCP 2025-11-25
 * security considerations: "localhost or HTTPS"): https anywhere, http on a loopback address
 * only (RFC 8252 §7.3), a native application's own scheme (`cursor://…`, RFC 8252 §7.1).
 */
export function redirectUriRefusal(uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return "must be an absolute URL";
  }
  if (url.hash || uri.includes("#")) return "must not have a fragment";
  if (url.protocol === "http:" && !LOOPBACK_HOSTS.has(url.hostname))
    return "must use https, or http on a loopback address (localhost, 127.0.0.1, [::1])";
  return undefined;
}
