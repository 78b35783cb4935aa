import { unauthorized, type Principal } from "../auth.js";
import { ServiceError } from "../errors.js";
import { reaches } from "../tenants/access.js";
import { requireVisibleServer } from "./mcp-federation.js";
import type { ToolsDeps } from "./deps.js";

/**
 * The gate's checks of an OAuth access token beyond its signature and audience (rpc/auth.ts):
 * the user still uses tools in the token's tenant, and on a server's own endpoint that tenant
 * still sees the server. Anything else is the 401 of a forged token, so a token of one tenant
 * (or endpoint) is refused on another exactly like one nobody issued (docs/mcp.md "The bridge as
 * a resource server").
 */
export async function admitAccessToken(deps: ToolsDeps, principal: Principal, server: string | undefined): Promise<void> {
  if (!principal.tenantId || !(await reaches(deps, principal.userId, principal.tenantId, "member"))) throw unauthorized("invalid");
  if (server === undefined) return;
  try {
    await requireVisibleServer(deps, principal, server);
  } catch (error) {
    if (error instanceof ServiceError && error.code === "NOT_FOUND") throw unauthorized("invalid");
    throw error;
  }
}
