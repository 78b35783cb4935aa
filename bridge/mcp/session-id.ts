import { randomBytes } from "node:crypto";
import type { ClientCapabilities, Implementation } from "@modelcontextprotocol/sdk/types.js";
import type { SecretBox } from "../../storage/secret-box.js";
import { isObject } from "../../rpc/validate.js";

/**
 * What an instance needs to serve a session another instance opened (docs/mcp.md "Sessions on
 * any instance"), carried in the `Mcp-Session-Id` itself, sealed with the service's secret box
 * (AES-256-GCM, DATA_ENCRYPTION_SECRET): nobody can read it, and a changed or made-up id does
 * not open (404, as an unknown session).
 */
export interface SessionClaims {
  /** Random, names the session in the revocation record. */
  nonce: string;
  /** Who opened it: every request's credential must be of this user (and tenant, when bound to one). */
  userId: string;
  tenantId?: string;
  /** Opened on `/bridge/mcp/servers/{name}/`: that server's name. */
  upstream?: string;
  /** The protocol version negotiated at initialize. */
  protocolVersion: string;
  capabilities: ClientCapabilities;
  clientInfo: Implementation;
  /** Seconds since the epoch: refused from then on. */
  expiresAt: number;
}

const KIND = "mcp-session/v1";
/** The id's own prefix (the secret box's `enc:v1:` is dropped: the id stays short and tells nothing). */
const PREFIX = "mcp1.";
const SEALED = "enc:v1:";

/** Seals `claims` into a session id: visible ASCII only (MCP Streamable HTTP "Session Management"). */
export function sealSessionId(box: SecretBox, claims: SessionClaims): string {
  return PREFIX + box.seal(JSON.stringify({ k: KIND, ...claims })).slice(SEALED.length);
}

/** The claims of a session id this service issued, not expired at `now` (ms); undefined for anything else. */
export function openSessionId(box: SecretBox, id: string, now = Date.now()): SessionClaims | undefined {
  if (!id.startsWith(PREFIX) || id.length > 16_384) return undefined;
  let claims: unknown;
  try {
    claims = JSON.parse(box.open(SEALED + id.slice(PREFIX.length)));
  } catch {
    return undefined;
  }
  if (!isObject(claims) || claims.k !== KIND) return undefined;
  const { nonce, userId, expiresAt, protocolVersion } = claims;
  if (typeof nonce !== "string" || typeof userId !== "string" || typeof protocolVersion !== "string") return undefined;
  if (typeof expiresAt !== "number" || expiresAt * 1000 <= now) return undefined;
  return claims as unknown as SessionClaims;
}

/** A fresh random nonce for a session's claims. */
export function sessionNonce(): string {
  return randomBytes(16).toString("base64url");
}
