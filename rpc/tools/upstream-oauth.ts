import {
  discoverOAuthServerInfo,
  exchangeAuthorization,
  extractWWWAuthenticateParams,
  refreshAuthorization,
  registerClient,
  startAuthorization,
} from "@modelcontextprotocol/sdk/client/auth.js";
import type { AuthorizationServerMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { ServiceError } from "../errors.js";
import type { GuardedFetch } from "../outbound/guarded-fetch.js";
import type { UpstreamAuthorization, UpstreamAuthorizationFlow, UpstreamTokens } from "../../storage/repos/upstream-oauth.js";

/**
 * The gateway as the OAuth client of an upstream MCP server (docs/mcp.md "Upstream servers that
 * need OAuth"), with the MCP SDK's client functions over the guarded fetch (every connection
 * under the private-address rule): discovery from the server's 401 and its protected-resource
 * metadata, the client by Client ID Metadata Document when the authorization server takes them
 * and the gateway is published over https, else Dynamic Client Registration, PKCE S256, the
 * resource indicator, RFC 9207's `iss` check, refresh.
 */

/** What the gateway says about itself as a client (its metadata document, and its registration). */
export function gatewayClientMetadata(redirectUri: string, clientId?: string) {
  return {
    ...(clientId ? { client_id: clientId } : {}),
    client_name: "Chat, agent and tool gateway",
    redirect_uris: [redirectUri],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
    application_type: "web",
  };
}

const unreachable = (what: string, error: unknown) =>
  new ServiceError("BAD_GATEWAY", `${what}: ${error instanceof Error ? error.message : String(error)}`);

/** The server's own answer to an unauthenticated request: where its metadata is and the scopes it wants. */
async function challengeOf(serverUrl: string, fetch: GuardedFetch): Promise<{ resourceMetadataUrl?: URL; scope?: string }> {
  const res = await fetch(serverUrl, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: {
        protocolVersion: LATEST_PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: "chat-agent-tool-gateway", version: "0.1.0" },
      },
    }),
  });
  await res.body?.cancel();
  if (res.status !== 401)
    throw new ServiceError("CONFLICT", `The MCP server answered ${res.status} without credentials: it does not ask for OAuth`);
  const { resourceMetadataUrl, scope } = extractWWWAuthenticateParams(res);
  return { ...(resourceMetadataUrl ? { resourceMetadataUrl } : {}), ...(scope ? { scope } : {}) };
}

export interface BeginOptions {
  serverUrl: string;
  redirectUri: string;
  /** The gateway's Client ID Metadata Document, when it is published over https. */
  clientMetadataUrl?: string;
  state: string;
  fetch: GuardedFetch;
}

/** Discovers the server's authorization server, gets a client there, and makes the authorization URL and the flow to keep. */
export async function beginUpstreamAuthorization(
  options: BeginOptions,
): Promise<{ authorizationUrl: URL; flow: Omit<UpstreamAuthorizationFlow, "tenantId" | "server" | "userId" | "expiresAt"> }> {
  const fetchFn = options.fetch as typeof fetch;
  let challenge: Awaited<ReturnType<typeof challengeOf>>;
  let info: Awaited<ReturnType<typeof discoverOAuthServerInfo>>;
  try {
    challenge = await challengeOf(options.serverUrl, options.fetch);
    info = await discoverOAuthServerInfo(options.serverUrl, {
      ...(challenge.resourceMetadataUrl ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : {}),
      fetchFn,
    });
  } catch (error) {
    if (error instanceof ServiceError) throw error;
    throw unreachable("The MCP server's OAuth discovery failed", error);
  }
  const metadata = info.authorizationServerMetadata;
  if (!metadata) throw new ServiceError("BAD_GATEWAY", `No authorization server metadata at ${info.authorizationServerUrl}`);
  if (!metadata.code_challenge_methods_supported?.includes("S256"))
    throw new ServiceError("BAD_GATEWAY", "The authorization server does not support PKCE with S256 (MCP requires it)");
  const scope = challenge.scope ?? info.resourceMetadata?.scopes_supported?.join(" ");
  const resource = info.resourceMetadata?.resource ?? options.serverUrl;
  let client: UpstreamAuthorizationFlow["client"];
  let registration: UpstreamAuthorizationFlow["registration"];
  if (
    options.clientMetadataUrl &&
    (metadata as { client_id_metadata_document_supported?: boolean }).client_id_metadata_document_supported
  ) {
    client = { client_id: options.clientMetadataUrl, token_endpoint_auth_method: "none" };
    registration = "metadata-document";
  } else {
    if (!metadata.registration_endpoint)
      throw new ServiceError(
        "BAD_GATEWAY",
        "The authorization server offers neither Client ID Metadata Documents (for this gateway) nor registration",
      );
    try {
      const registered = await registerClient(info.authorizationServerUrl, {
        metadata,
        clientMetadata: { ...gatewayClientMetadata(options.redirectUri), ...(scope ? { scope } : {}) },
        fetchFn,
      });
      client = {
        client_id: registered.client_id,
        ...(registered.client_secret ? { client_secret: registered.client_secret } : {}),
        ...(registered.token_endpoint_auth_method ? { token_endpoint_auth_method: registered.token_endpoint_auth_method } : {}),
      };
    } catch (error) {
      throw unreachable("Registration with the authorization server failed", error);
    }
    registration = "dynamic";
  }
  const { authorizationUrl, codeVerifier } = await startAuthorization(info.authorizationServerUrl, {
    metadata,
    clientInformation: client,
    redirectUrl: options.redirectUri,
    state: options.state,
    resource,
    ...(scope ? { scope } : {}),
  });
  return {
    authorizationUrl,
    flow: {
      codeVerifier,
      redirectUri: options.redirectUri,
      issuer: metadata.issuer,
      authorizationServerUrl: info.authorizationServerUrl,
      resource,
      client,
      registration,
      metadata: metadata as unknown as Record<string, unknown>,
    },
  };
}

function tokensOf(tokens: OAuthTokens, previous?: UpstreamTokens): UpstreamTokens {
  return {
    access_token: tokens.access_token,
    token_type: tokens.token_type,
    ...(tokens.refresh_token
      ? { refresh_token: tokens.refresh_token }
      : previous?.refresh_token
        ? { refresh_token: previous.refresh_token }
        : {}),
    ...(tokens.scope ? { scope: tokens.scope } : {}),
    ...(tokens.expires_in ? { expiresAt: Date.now() + tokens.expires_in * 1000 } : {}),
  };
}

/** Exchanges the callback's code; RFC 9207: an `iss` that is not the flow's issuer (or missing where promised) is refused. */
export async function completeUpstreamAuthorization(
  flow: UpstreamAuthorizationFlow,
  answer: { code: string; iss?: string },
  fetch: GuardedFetch,
): Promise<UpstreamTokens> {
  const promised = (flow.metadata as { authorization_response_iss_parameter_supported?: boolean })
    .authorization_response_iss_parameter_supported;
  if ((answer.iss !== undefined && answer.iss !== flow.issuer) || (promised && answer.iss === undefined))
    throw new ServiceError("BAD_REQUEST", "The authorization response came from another authorization server (RFC 9207): refused");
  try {
    const tokens = await exchangeAuthorization(flow.authorizationServerUrl, {
      metadata: flow.metadata as unknown as AuthorizationServerMetadata,
      clientInformation: flow.client,
      authorizationCode: answer.code,
      codeVerifier: flow.codeVerifier,
      redirectUri: flow.redirectUri,
      ...(flow.resource ? { resource: flow.resource } : {}),
      fetchFn: fetch as typeof globalThis.fetch,
    });
    return tokensOf(tokens);
  } catch (error) {
    throw unreachable("The authorization server refused the code", error);
  }
}

/** New tokens from the refresh token (undefined when there is none to use). */
export async function refreshUpstreamAuthorization(
  authorization: UpstreamAuthorization,
  fetch: GuardedFetch,
): Promise<UpstreamTokens | undefined> {
  const refreshToken = authorization.tokens.refresh_token;
  if (!refreshToken) return undefined;
  const tokens = await refreshAuthorization(authorization.authorizationServerUrl, {
    metadata: authorization.metadata as unknown as AuthorizationServerMetadata,
    clientInformation: authorization.client,
    refreshToken,
    ...(authorization.resource ? { resource: authorization.resource } : {}),
    fetchFn: fetch as typeof globalThis.fetch,
  });
  return tokensOf(tokens, authorization.tokens);
}
