import type { Config } from "../../rpc/config.js";
import { SURFACE_BASES } from "../../rpc/surfaces.js";

/** The MCP endpoint's resource identifier path (RFC 9728 §1.2: the resource the token is for). */
export const MCP_RESOURCE_PATH = `${SURFACE_BASES.bridge}/mcp`;

/** RFC 9728 §3.1: the metadata of `/bridge/mcp` lives at the well-known prefix + the resource path. */
export const METADATA_PATH = `/.well-known/oauth-protected-resource${MCP_RESOURCE_PATH}`;

/** The public origin: PUBLIC_URL when set (behind a proxy), else the origin the request came to. */
export function publicOrigin(config: Pick<Config, "PUBLIC_URL">, request: Request): string {
  return (config.PUBLIC_URL ?? new URL(request.url).origin).replace(/\/$/, "");
}

/** `WWW-Authenticate` of a 401 (RFC 9728 §5.1, MCP 2025-11-25 "Authorization"). */
export function wwwAuthenticate(origin: string, error?: "invalid_token"): string {
  const parts = [`resource_metadata="${origin}${METADATA_PATH}"`];
  if (error) parts.unshift(`error="${error}"`);
  return `Bearer ${parts.join(", ")}`;
}

/**
 * The protected-resource metadata document (RFC 9728 §2). The bridge takes the Gateway's own
 * credentials (session tokens, `sk_` keys, PLATFORM_SERVICE_KEY; docs/interface.md 5) rather than tokens of
 * an OAuth authorization server, so `authorization_servers` is left out: clients are configured
 * with a bearer token instead of running an OAuth flow.
 */
export function protectedResourceMetadata(origin: string) {
  return {
    resource: origin + MCP_RESOURCE_PATH,
    resource_name: "Tool bridge (MCP)",
    bearer_methods_supported: ["header"],
    scopes_supported: [],
    resource_documentation: `${origin}/docs`,
  };
}
