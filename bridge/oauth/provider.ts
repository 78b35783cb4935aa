import type { Configuration, KoaContextWithOIDC, Provider } from "oidc-provider";
import type { Config } from "../../rpc/config.js";
import type { Logger } from "../../rpc/log.js";
import { MCP_SCOPES, parseMcpResource, redirectUriRefusal } from "../../rpc/credentials/oauth-resource.js";
import type { KeyRingView } from "../../rpc/credentials/oauth-keys.js";
import { GRANT_CLAIM, TENANT_CLAIM } from "../../rpc/credentials/oauth-tokens.js";
import type { GuardedFetch } from "../../rpc/outbound/guarded-fetch.js";
import type { UsersRepo } from "../../storage/repos/users.js";
import type { OAuthConsentsRepo } from "../../storage/repos/oauth-consents.js";
import type { OAuthRecordsRepo } from "../../storage/repos/oauth-records.js";
import { RecordsAdapter } from "./adapter.js";
import { recordPending, INTERACTION_SECONDS } from "./interaction.js";
import { errorPage } from "./pages.js";
import type { OidcModule } from "./load.js";
import { servedOrigins } from "./origins.js";

/** The authorization server's routes, all under /oauth (docs/mcp.md "Endpoints"); features that are off keep a path nobody serves. */
export const ROUTES = {
  authorization: "/oauth/authorize",
  token: "/oauth/token",
  registration: "/oauth/register",
  revocation: "/oauth/revoke",
  jwks: "/oauth/jwks",
  userinfo: "/oauth/userinfo",
  end_session: "/oauth/end-session",
  introspection: "/oauth/introspect",
  pushed_authorization_request: "/oauth/par",
  code_verification: "/oauth/device",
  device_authorization: "/oauth/device/auth",
  backchannel_authentication: "/oauth/backchannel",
  challenge: "/oauth/challenge",
  credential: "/oauth/credential",
} as const;

/** A consent (and the grant behind it) lasts a year; then the user is asked again (docs/mcp.md "Tokens"). */
export const GRANT_SECONDS = 365 * 86_400;

export interface ProviderDeps {
  config: Config;
  log: Logger;
  users: UsersRepo;
  records: OAuthRecordsRepo;
  consents: OAuthConsentsRepo;
  /** Every Client ID Metadata Document is fetched through the private-address rule (rpc/outbound). */
  fetch: GuardedFetch;
  /** Revokes a grant and its consent everywhere. */
  revokeGrant(grantId: string): Promise<void>;
  /** The secret the authorization server's cookies are signed with, the same on every instance. */
  cookieKey: string;
}

/**
 * oidc-provider configured as the MCP authorization server (docs/mcp.md "Authorization server"):
 * authorization code with PKCE (S256 only), a resource indicator required and bound into the
 * token's audience, JWT access tokens signed with the current rotated key, rotating refresh
 * tokens, revocation, Client ID Metadata Documents, Dynamic Client Registration and clients
 * operators registered, and an interaction on every authorization (the consent page).
 */
export function buildProvider(oidc: OidcModule, issuer: string, keys: KeyRingView, deps: ProviderDeps): Provider {
  const { config } = deps;
  const { errors, interactionPolicy } = oidc;
  // The signing key first: oidc-provider signs with the first key that fits (the kid is named below too).
  const jwks = [keys.signing, ...keys.published.filter((key) => key.kid !== keys.signing.kid)].map((key) => ({
    ...key.jwk,
    kid: key.kid,
    alg: key.alg,
    use: "sig",
  }));

  const configuration: Configuration = {
    adapter: (name: string) =>
      new RecordsAdapter(name, deps.records, {
        dynamicClientSeconds: config.OAUTH_DYNAMIC_CLIENT_DAYS * 86_400,
        revokeGrant: deps.revokeGrant,
        invalidGrant: (description) => new errors.InvalidGrant(description),
      }),
    jwks: { keys: jwks as never },
    routes: ROUTES,
    responseTypes: ["code"],
    // Listed so clients may register them (RFC 7591 `scope`) and find them in the metadata; the
    // consent grants them both as the resource's scopes and as these (bridge/oauth/interaction.ts).
    scopes: ["openid", "offline_access", ...MCP_SCOPES],
    pkce: { required: () => true },
    clientDefaults: {
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
      id_token_signed_response_alg: "ES256",
    },
    enabledJWA: { idTokenSigningAlgValues: ["ES256"] },
    clientAuthMethods: ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"],
    cookies: {
      keys: [deps.cookieKey],
      long: { httpOnly: true, sameSite: "lax", signed: true },
      short: { httpOnly: true, sameSite: "lax", signed: true },
    },
    async findAccount(_ctx, sub) {
      const user = await deps.users.get(sub);
      return user ? { accountId: user.id, claims: () => ({ sub: user.id }) } : undefined;
    },
    features: {
      devInteractions: { enabled: false },
      userinfo: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      introspection: { enabled: false },
      dPoP: { enabled: false },
      pushedAuthorizationRequests: { enabled: false },
      revocation: { enabled: true },
      registration: { enabled: config.OAUTH_DYNAMIC_REGISTRATION, issueRegistrationAccessToken: false },
      clientIdMetadataDocument: { enabled: true, ack: "draft-02" },
      resourceIndicators: {
        enabled: true,
        // RFC 8707 is required here (docs/mcp.md "Resource indicators"): an authorization without it is refused.
        async defaultResource(ctx: KoaContextWithOIDC, _client: unknown, oneOf?: readonly string[]) {
          if (oneOf) return oneOf;
          if (ctx.oidc.route === "authorization")
            throw new errors.InvalidTarget("the resource parameter is required: the URL of the MCP endpoint the token is for (RFC 8707)");
          return undefined;
        },
        useGrantedResource: () => true,
        async getResourceServerInfo(ctx: KoaContextWithOIDC, indicator: string) {
          const target = parseMcpResource(indicator, servedOrigins(config, ctx.req));
          if (!target) throw new errors.InvalidTarget("the resource must be this gateway's /bridge/mcp or /bridge/mcp/servers/{name}");
          return {
            scope: MCP_SCOPES.join(" "),
            audience: target.resource,
            accessTokenTTL: config.OAUTH_ACCESS_TOKEN_SECONDS,
            accessTokenFormat: "jwt" as const,
            jwt: { sign: { alg: "ES256", kid: keys.signing.kid } },
          };
        },
      },
    },
    async extraTokenClaims(_ctx, token) {
      // The tenant the consent named, and the consent itself: the resource server checks both on every request.
      const grantId = (token as { grantId?: string }).grantId;
      if ((token as { kind?: string }).kind !== "AccessToken" || !grantId) return undefined;
      const consent = await deps.consents.getConsent(grantId);
      return consent ? { [TENANT_CLAIM]: consent.tenantId, [GRANT_CLAIM]: grantId } : undefined;
    },
    extraClientMetadata: {
      properties: ["gateway_redirect_check"],
      validator(_ctx, _key, _value, metadata) {
        for (const uri of (metadata.redirect_uris as string[] | undefined) ?? []) {
          const refusal = redirectUriRefusal(uri);
          if (refusal) throw new errors.InvalidRedirectUri(`redirect_uris: ${uri} ${refusal}`);
        }
      },
    },
    async issueRefreshToken(_ctx, client) {
      return client.grantTypeAllowed("refresh_token");
    },
    // OAuth 2.1 and MCP: a refresh token is used once; each use returns a new one.
    rotateRefreshToken: true,
    expiresWithSession: async () => false,
    ttl: {
      AccessToken: config.OAUTH_ACCESS_TOKEN_SECONDS,
      AuthorizationCode: 60,
      RefreshToken: config.OAUTH_REFRESH_TOKEN_DAYS * 86_400,
      Grant: GRANT_SECONDS,
      Interaction: INTERACTION_SECONDS,
      Session: INTERACTION_SECONDS,
      IdToken: config.OAUTH_ACCESS_TOKEN_SECONDS,
      ClientCredentials: config.OAUTH_ACCESS_TOKEN_SECONDS,
      DeviceCode: 600,
      BackchannelAuthenticationRequest: 600,
      PreAuthorizedCode: 600,
    },
    interactions: {
      policy: consentEveryTime(interactionPolicy),
      url: (ctx, interaction) => recordPending(oidc, ctx, interaction, deps),
    },
    fetch: (url, options) => {
      // oidc-provider's own SSRF dispatcher is replaced by the service's private-address rule.
      const { dispatcher: _dispatcher, ...init } = options as RequestInit & { dispatcher?: unknown };
      return deps.fetch(url instanceof Request ? url.url : url, init);
    },
    async renderError(ctx, out) {
      ctx.type = "html";
      ctx.body = errorPage("The sign-in could not go on", `${out.error}: ${out.error_description ?? ""}`);
    },
  };
  const provider = new oidc.Provider(issuer, configuration);
  // Behind a TLS-terminating proxy (PUBLIC_URL https), X-Forwarded-Proto says the request was https.
  provider.proxy = issuer.startsWith("https:");
  return provider;
}

/**
 * The interaction policy: every authorization request goes to the consent page, where the
 * console's signed-in user (the same users and passwords) chooses a tenant and scopes. The
 * gateway keeps no sign-in of its own here, so a second authorization never reuses the first
 * one's user silently. oidc-provider's consent checks follow, satisfied by the grant made then.
 */
function consentEveryTime(policy: OidcModule["interactionPolicy"]) {
  const { Prompt, Check, base } = policy;
  const prompts = base();
  prompts.remove("login");
  prompts.add(
    new Prompt(
      { name: "login", requestable: true },
      new Check("gateway_consent", "The user signs in to the console and answers the consent page", (ctx) =>
        ctx.oidc.result?.consent?.grantId ? Check.NO_NEED_TO_PROMPT : Check.REQUEST_PROMPT,
      ),
    ),
    0,
  );
  return prompts;
}
