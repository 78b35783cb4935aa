import type { Adapter, AdapterPayload } from "oidc-provider";
import type { OAuthPayload, OAuthRecordsRepo } from "../../storage/repos/oauth-records.js";

export interface AdapterOptions {
  /** How long a dynamically registered client is kept without being used (OAUTH_DYNAMIC_CLIENT_DAYS); each use extends it. */
  dynamicClientSeconds: number;
  /**
   * Revokes a grant everywhere (its records, and the consent the service keeps beside it):
   * oidc-provider revokes one on a replayed code or refresh token and on a refresh token's revocation.
   */
  revokeGrant(grantId: string): Promise<void>;
  /** oidc-provider's `invalid_grant` error (the module is loaded lazily: bridge/oauth/load.ts). */
  invalidGrant(description: string): Error;
}

/**
 * oidc-provider's storage adapter over the service's own store (docs/mcp.md "What is stored"),
 * so every instance on one Redis (or the one process on fs) shares clients, grants, codes and
 * refresh tokens. One adapter per model name, as oidc-provider makes them.
 */
export class RecordsAdapter implements Adapter {
  readonly #model: string;
  readonly #records: OAuthRecordsRepo;
  readonly #options: AdapterOptions;

  constructor(model: string, records: OAuthRecordsRepo, options: AdapterOptions) {
    this.#model = model;
    this.#records = records;
    this.#options = options;
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
    // A dynamically registered client has no expiry of its own: it is dropped once unused for a while.
    if (this.#model === "Client" && expiresIn === undefined && isDynamic(payload)) {
      const exp = Math.floor(Date.now() / 1000) + this.#options.dynamicClientSeconds;
      await this.#records.upsert(this.#model, id, { ...(payload as OAuthPayload), exp }, this.#options.dynamicClientSeconds);
      return;
    }
    await this.#records.upsert(this.#model, id, payload as OAuthPayload, expiresIn);
  }

  async find(id: string): Promise<AdapterPayload | undefined> {
    const found = await this.#records.find(this.#model, id);
    if (!found) return undefined;
    if (this.#model === "Client" && typeof found.exp === "number") {
      // Used now: kept another full period (written again once half of it has passed).
      const left = found.exp - Date.now() / 1000;
      if (left < this.#options.dynamicClientSeconds / 2) {
        const exp = Math.floor(Date.now() / 1000) + this.#options.dynamicClientSeconds;
        await this.#records.upsert(this.#model, id, { ...found, exp }, this.#options.dynamicClientSeconds);
      }
      const { exp: _exp, ...client } = found;
      return client as AdapterPayload;
    }
    if (this.#model in RACED && typeof found.consumed === "number" && Date.now() / 1000 - found.consumed < CONCURRENT_USE_SECONDS) {
      // Used a moment ago by a concurrent request: this one fails at `consume` (invalid_grant)
      // without oidc-provider taking it for a replay and revoking the whole grant.
      const { consumed: _consumed, ...rest } = found;
      return rest as AdapterPayload;
    }
    return found as AdapterPayload;
  }

  async findByUserCode(): Promise<undefined> {
    // No device flow (docs/mcp.md "Authorization server").
    return undefined;
  }

  async findByUid(uid: string): Promise<AdapterPayload | undefined> {
    return (await this.#records.findByUid(this.#model, uid)) as AdapterPayload | undefined;
  }

  /**
   * One compare-and-set: of two instances redeeming the same code (or rotating the same refresh
   * token) at once, the one that loses gets `invalid_grant`, as if it came second.
   */
  async consume(id: string): Promise<void> {
    if (!(await this.#records.consume(this.#model, id))) throw this.#options.invalidGrant("grant request is invalid: already used");
  }

  async destroy(id: string): Promise<void> {
    await this.#records.destroy(this.#model, id);
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    // Called once per model: the first call revokes the grant for every model, the others find it done.
    await this.#options.revokeGrant(grantId);
  }
}

/**
 * A code or refresh token presented again within this many seconds of its use is taken for a
 * concurrent request of the same client (two tabs, a retry), refused alone; later, for a replay,
 * which revokes its grant (docs/mcp.md "Tokens").
 */
const CONCURRENT_USE_SECONDS = 10;
const RACED = { AuthorizationCode: true, RefreshToken: true };

/** A client registered through the registration endpoint (operators' clients and metadata documents are not stored this way). */
function isDynamic(payload: AdapterPayload): boolean {
  return typeof payload.client_id === "string" && typeof payload.client_id_issued_at === "number";
}
