import type { IncomingMessage, ServerResponse } from "node:http";
import type { Provider } from "oidc-provider";
import type { Config } from "../../rpc/config.js";
import type { Logger } from "../../rpc/log.js";
import type { OAuthKeyRing } from "../../rpc/credentials/oauth-keys.js";
import type { GuardedFetch } from "../../rpc/outbound/guarded-fetch.js";
import type { UsersRepo } from "../../storage/repos/users.js";
import type { OAuthConsentsRepo } from "../../storage/repos/oauth-consents.js";
import type { OAuthKeysRepo } from "../../storage/repos/oauth-keys.js";
import type { OAuthRecordsRepo } from "../../storage/repos/oauth-records.js";
import { loadOidcProvider } from "./load.js";
import { buildProvider } from "./provider.js";

export interface AuthorizationServerDeps {
  config: Config;
  log: Logger;
  ring: OAuthKeyRing;
  keys: OAuthKeysRepo;
  users: UsersRepo;
  records: OAuthRecordsRepo;
  consents: OAuthConsentsRepo;
  fetch: GuardedFetch;
}

interface Built {
  version: number;
  provider: Provider;
  callback: (req: IncomingMessage, res: ServerResponse) => unknown;
}

/**
 * The authorization server of one instance: oidc-provider built for the issuer and the current
 * key set, and built again when the key set changed (a rotation made here or on another
 * instance), since oidc-provider reads its keys once. Everything else it keeps is in storage,
 * so a rebuilt provider (or another instance) carries on every authorization in flight.
 */
export class AuthorizationServer {
  readonly #deps: AuthorizationServerDeps;
  readonly #built = new Map<string, Promise<Built>>();
  #cookieKey: Promise<string> | undefined;

  constructor(deps: AuthorizationServerDeps) {
    this.#deps = deps;
  }

  /** The provider for `issuer` with the current keys. */
  async forIssuer(issuer: string): Promise<Built> {
    const keys = await this.#deps.ring.current();
    const cached = this.#built.get(issuer);
    if (cached) {
      const built = await cached.catch(() => undefined);
      if (built?.version === keys.version) return built;
    }
    const building = (async (): Promise<Built> => {
      const oidc = await loadOidcProvider(this.#deps.log);
      const cookieKey = await (this.#cookieKey ??= this.#deps.keys.cookieSecret());
      const provider = buildProvider(oidc, issuer, keys, {
        ...this.#deps,
        cookieKey,
        revokeGrant: (grantId) => this.revokeGrant(grantId),
      });
      return { version: keys.version, provider, callback: provider.callback() };
    })();
    // One issuer in a deployment (PUBLIC_URL, or the listening address): the map stays tiny.
    this.#built.set(issuer, building);
    return building;
  }

  /** Revokes a grant and the consent kept beside it, on every instance (records.revokeGrant). */
  async revokeGrant(grantId: string): Promise<void> {
    const consent = await this.#deps.consents.getConsent(grantId);
    await this.#deps.records.revokeGrant(grantId);
    if (consent) await this.#deps.consents.deleteConsent(consent);
  }
}
