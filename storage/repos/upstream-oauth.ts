import type { SecretBox } from "../secret-box.js";
import { sha256Hex } from "../ids.js";
import type { Store } from "../store.js";
import { JsonCells } from "./oauth-cells.js";

/** The tokens of an upstream server's authorization server, as the gateway (its OAuth client) holds them. */
export interface UpstreamTokens {
  access_token: string;
  token_type: string;
  refresh_token?: string;
  scope?: string;
  /** When the access token expires (ms since the epoch), if the server said. */
  expiresAt?: number;
}

/** An upstream server the gateway is authorized to, for one tenant (docs/mcp.md "Upstream servers that need OAuth"). */
export interface UpstreamAuthorization {
  /** The authorization server's issuer and the URL its metadata was found at. */
  issuer: string;
  authorizationServerUrl: string;
  /** The resource indicator the tokens are for (the upstream's canonical URL). */
  resource?: string;
  /** The gateway's client at that authorization server: registered dynamically, or its Client ID Metadata Document URL. */
  client: { client_id: string; client_secret?: string; token_endpoint_auth_method?: string };
  registration: "metadata-document" | "dynamic";
  /** The authorization server's metadata (its token and revocation endpoints). */
  metadata: Record<string, unknown>;
  tokens: UpstreamTokens;
  connectedBy: string;
  connectedAt: string;
  refreshedAt?: string;
}

/** An authorization the gateway started and waits to complete (by its state), for the user who started it. */
export interface UpstreamAuthorizationFlow {
  tenantId: string;
  server: string;
  userId: string;
  codeVerifier: string;
  redirectUri: string;
  issuer: string;
  authorizationServerUrl: string;
  resource?: string;
  client: UpstreamAuthorization["client"];
  registration: UpstreamAuthorization["registration"];
  /** The authorization server's metadata as discovered (its endpoints), for the token request. */
  metadata: Record<string, unknown>;
  expiresAt: string;
}

/** Told to every instance when a server's authorization changes (it reloads it into its connection). */
export interface UpstreamAuthorizationEvent {
  tenantId: string;
  server: string;
}

const CHANNEL = "upstream-oauth";

/**
 * The gateway's own authorizations to upstream MCP servers, one per tenant and server, sealed
 * whole with DATA_ENCRYPTION_SECRET (tokens and any client secret); the flows waiting for their
 * callback, each taken once; and a refresh lease, so only one instance rotates a refresh token
 * at a time (an authorization server that rotates would take a second use for a replay).
 */
export class UpstreamOAuthRepo {
  readonly #cells: JsonCells;
  readonly #box: SecretBox;
  readonly #store: Store;

  constructor(store: Store, box: SecretBox) {
    this.#store = store;
    this.#cells = new JsonCells(store.atomic);
    this.#box = box;
  }

  #key(tenantId: string, server: string): string {
    return `upstream-oauth:${tenantId}:${server}`;
  }

  async get(tenantId: string, server: string): Promise<UpstreamAuthorization | undefined> {
    const sealed = await this.#cells.get<string>(this.#key(tenantId, server));
    return sealed === undefined ? undefined : (this.#box.openJson(sealed) as UpstreamAuthorization);
  }

  async put(tenantId: string, server: string, authorization: UpstreamAuthorization): Promise<void> {
    await this.#cells.put(this.#key(tenantId, server), this.#box.sealJson(authorization));
  }

  async delete(tenantId: string, server: string): Promise<void> {
    await this.#cells.delete(this.#key(tenantId, server));
  }

  /** Keeps a flow until its callback (by the SHA-256 of its state), for as long as it may take. */
  async putFlow(state: string, flow: UpstreamAuthorizationFlow): Promise<void> {
    await this.#cells.put(`upstream-oauth-flow:${sha256Hex(state)}`, this.#box.sealJson(flow), Date.parse(flow.expiresAt) - Date.now());
  }

  /** The flow of this state, left in place (to check who may complete it before taking it). */
  async peekFlow(state: string): Promise<UpstreamAuthorizationFlow | undefined> {
    const sealed = await this.#cells.get<string>(`upstream-oauth-flow:${sha256Hex(state)}`);
    return sealed === undefined ? undefined : (this.#box.openJson(sealed) as UpstreamAuthorizationFlow);
  }

  /** The flow of this state, once; undefined for an unknown, expired or already completed one. */
  async takeFlow(state: string): Promise<UpstreamAuthorizationFlow | undefined> {
    let taken: string | undefined;
    await this.#cells.update<string>(`upstream-oauth-flow:${sha256Hex(state)}`, (current) => {
      taken = current;
      return current === undefined ? undefined : { value: null };
    });
    return taken === undefined ? undefined : (this.#box.openJson(taken) as UpstreamAuthorizationFlow);
  }

  /** Takes the refresh lease of one authorization for `ms`; false while another holder has it. */
  leaseRefresh(tenantId: string, server: string, holder: string, ms: number): Promise<boolean> {
    return this.#store.atomic.setIfAbsent(`upstream-oauth-refresh:${tenantId}:${server}`, holder, ms);
  }

  releaseRefresh(tenantId: string, server: string, holder: string): Promise<boolean> {
    return this.#store.atomic.compareAndSet(`upstream-oauth-refresh:${tenantId}:${server}`, holder, null);
  }

  announce(event: UpstreamAuthorizationEvent): Promise<void> {
    return this.#store.bus.publish(CHANNEL, event);
  }

  subscribe(handler: (event: UpstreamAuthorizationEvent) => void): Promise<() => Promise<void>> {
    return this.#store.bus.subscribe(CHANNEL, (message) => handler(message as UpstreamAuthorizationEvent));
  }
}
