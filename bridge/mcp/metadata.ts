import type { Config } from "../../rpc/config.js";
import { MCP_RESOURCE_PATH, MCP_SCOPES, mcpResource } from "../../rpc/credentials/oauth-resource.js";

export { MCP_RESOURCE_PATH };

/** RFC 9728 §3.1: the metadata of `/bridge/mcp` lives at the well-known prefix + the resource path. */
const WELL_KNOWN = "/.well-known/oauth-protected-resource";
export const METADATA_PATH = `${WELL_KNOWN}${MCP_RESOURCE_PATH}`;

/** The public origin: PUBLIC_URL when set (behind a proxy), else the origin the request came to. */
export function publicOrigin(config: Pick<Config, "PUBLIC_URL">, request: Request): string {
  return (config.PUBLIC_URL ?? new URL(request.url).origin).replace(/\/$/, "");
}

/** Where the metadata of the catalog endpoint, or of one server's endpoint, is published (RFC 9728 §3.1, path inserted). */
export function metadataUrl(origin: string, server?: string): string {
  return origin + WELL_KNOWN + new URL(mcpResource(origin, server)).pathname;
}

/** Paths that serve protected-resource metadata: the path-inserted forms, their aliases, and the root (MCP 2025-11-25 discovery order). */
export const METADATA_ROUTES = {
  catalog: [METADATA_PATH, `${METADATA_PATH}/`, `${METADATA_PATH}/mcp`, `${METADATA_PATH}/mcp/`, WELL_KNOWN],
  server: [`${METADATA_PATH}/servers/:name`, `${METADATA_PATH}/servers/:name/`],
};

const SCOPE = MCP_SCOPES.join(" ");

export interface ChallengeOptions {
  /** OAUTH_DISCOVERY: point at the metadata and name the scopes. */
  discovery: boolean;
  /** The server's own endpoint, when that is what was called. */
  server?: string;
  /** `invalid_token` when a credential was presented and refused; `insufficient_scope` for a 403 step-up. */
  error?: "invalid_token" | "insufficient_scope";
  description?: string;
}

/**
 * `WWW-Authenticate` of a 401 or a 403 (RFC 6750 §3, RFC 9728 §5.1, MCP 2025-11-25
 * "Authorization"): the metadata's address and the scopes the endpoint needs, so an OAuth
 * client finds the authorization server; with OAUTH_DISCOVERY off, neither, so a client
 * configured with a header keeps to it (docs/mcp.md "Discovery").
 */
export function challenge(origin: string, options: ChallengeOptions): string {
  const parts: string[] = [];
  if (options.error) parts.push(`error="${options.error}"`);
  if (options.discovery) {
    parts.push(`resource_metadata="${metadataUrl(origin, options.server)}"`, `scope="${SCOPE}"`);
  } else {
    parts.push(`realm="${mcpResource(origin, options.server)}"`);
  }
  if (options.description) parts.push(`error_description="${options.description.replace(/["\\]/g, "")}"`);
  return `Bearer ${parts.join(", ")}`;
}

/**
 * The protected-resource metadata document (RFC 9728 §2) of the catalog endpoint or one server's
 * endpoint: the resource's canonical URL, the authorization server (this gateway's own), the
 * scopes, and how tokens are presented (docs/mcp.md "Discovery").
 */
export function protectedResourceMetadata(origin: string, issuer: string, server?: string) {
  return {
    resource: mcpResource(origin, server),
    authorization_servers: [issuer],
    resource_name: server === undefined ? "Tool bridge (MCP)" : `Tool bridge (MCP): ${server}`,
    bearer_methods_supported: ["header"],
    scopes_supported: [...MCP_SCOPES],
    resource_documentation: `${origin}/docs`,
  };
}
