import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";
import type { UpstreamRegistry } from "../tools/ports.js";
import type { OAuthConsentsRepo } from "../../storage/repos/oauth-consents.js";
import type { OAuthRecordsRepo } from "../../storage/repos/oauth-records.js";

/** What the oauth domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type OAuthDeps = Pick<Repos, "users" | "tenants" | "members" | "agents"> &
  Pick<Ports, "config" | "sink"> & {
    /** Consents and the authorization requests waiting for one. */
    consents: OAuthConsentsRepo;
    /** The authorization server's records: revoking a consent revokes its grant there. */
    records: OAuthRecordsRepo;
    /** Which upstream servers a tenant sees (a consent to one server's endpoint needs it). */
    upstream: UpstreamRegistry;
  };

export const oauthDomain = domain<OAuthDeps>("oauth");

/** The call context of an oauth handler or helper. */
export type OAuthContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, OAuthDeps>;
