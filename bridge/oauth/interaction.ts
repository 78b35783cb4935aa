import type { IncomingMessage, ServerResponse } from "node:http";
import type { InteractionResults, KoaContextWithOIDC, Provider } from "oidc-provider";
import { MCP_SCOPES, parseMcpResource } from "../../rpc/credentials/oauth-resource.js";
import { sha256Hex } from "../../storage/ids.js";
import type { ClientRegistration, OAuthConsentsRepo, PendingAuthorization } from "../../storage/repos/oauth-consents.js";
import type { OAuthRecordsRepo } from "../../storage/repos/oauth-records.js";
import type { OidcModule } from "./load.js";

/** How long a user has to sign in and answer the consent page. */
export const INTERACTION_SECONDS = 900;

/** Scopes of OpenID Connect a client may ask for besides the MCP ones: granted with the consent, never shown as a choice. */
const OIDC_SCOPES = ["openid", "offline_access"];

/** Where the consent page lives (facade/console serves it; the console's Preact page draws it). */
export const interactionPath = (uid: string) => `/oauth/interaction/${encodeURIComponent(uid)}`;

type Interaction = Parameters<NonNullable<NonNullable<import("oidc-provider").Configuration["interactions"]>["url"]>>[1];

const asList = (value: unknown): string[] => (value === undefined ? [] : Array.isArray(value) ? value.map(String) : [String(value)]);

/**
 * oidc-provider's `interactions.url`: keeps what the consent page shows of the request (the
 * client, where the browser goes back, the resource and scopes) and sends the browser there.
 */
export async function recordPending(
  oidc: OidcModule,
  ctx: KoaContextWithOIDC,
  interaction: Interaction,
  deps: { consents: OAuthConsentsRepo; records: OAuthRecordsRepo },
): Promise<string> {
  const params = interaction.params as Record<string, unknown>;
  const client = ctx.oidc.client;
  if (!client) throw new oidc.errors.InvalidClient();
  const indicators = asList(params.resource);
  if (indicators.length !== 1) throw new oidc.errors.InvalidTarget("ask for exactly one resource: the MCP endpoint the token is for");
  const requested = asList(params.scope)
    .flatMap((scope) => scope.split(" "))
    .filter(Boolean);
  const scopes = MCP_SCOPES.filter((scope) => requested.includes(scope));
  const registration: ClientRegistration = (client as unknown as { clientIdMetadataDocument?: boolean }).clientIdMetadataDocument
    ? "metadata-document"
    : (await deps.records.operatorClientIds()).includes(client.clientId)
      ? "operator"
      : "dynamic";
  const pending: PendingAuthorization = {
    uid: interaction.uid,
    clientId: client.clientId,
    clientName: client.clientName ?? client.clientId,
    ...(client.clientUri ? { clientUri: client.clientUri } : {}),
    ...(client.logoUri ? { logoUri: client.logoUri } : {}),
    registration,
    applicationType: client.applicationType === "native" ? "native" : "web",
    redirectUri: typeof params.redirect_uri === "string" ? params.redirect_uri : client.redirectUris![0]!,
    resource: parseMcpResource(indicators[0]!, () => true)?.resource ?? indicators[0]!,
    requestedResource: indicators[0]!,
    scopes: scopes.length ? [...scopes] : [...MCP_SCOPES],
    oidcScopes: OIDC_SCOPES.filter((scope) => requested.includes(scope)),
    returnTo: interaction.returnTo,
    createdAt: new Date().toISOString(),
    expiresAt: new Date(interaction.exp * 1000).toISOString(),
  };
  await deps.consents.putPending(pending);
  return interactionPath(interaction.uid);
}

/** Why a decision could not be applied, for the page the browser is shown. */
export class ConfirmRefused extends Error {}

/**
 * Applies the consent page's decision to the authorization request, once, and answers where the
 * browser resumes it (docs/mcp.md "Sign-in and consent"). Two things must hold: the browser
 * started this authorization (oidc-provider's signed interaction cookie, scoped to this path),
 * and it is the browser that decided (the nonce the decision answered it with). A consent page
 * link sent to someone else is therefore useless to both: the sender's browser has no nonce,
 * the receiver's no cookie.
 */
export async function confirmDecision(
  provider: Provider,
  req: IncomingMessage,
  res: ServerResponse,
  uid: string,
  nonce: string,
  deps: { consents: OAuthConsentsRepo; grantSeconds: number },
): Promise<string> {
  let interaction: Awaited<ReturnType<Provider["interactionDetails"]>>;
  try {
    interaction = await provider.interactionDetails(req, res);
  } catch {
    throw new ConfirmRefused("This authorization was started in another browser, or has expired.");
  }
  if (interaction.uid !== uid) throw new ConfirmRefused("This authorization was started in another browser, or has expired.");
  const pending = nonce ? await deps.consents.takeDecision(uid, sha256Hex(nonce)) : undefined;
  const decision = pending?.decision;
  if (!pending || !decision) throw new ConfirmRefused("This consent was answered in another browser, was used already, or has expired.");
  let result: InteractionResults;
  if (decision.approve && decision.tenantId && decision.scopes) {
    const grant = new provider.Grant({ accountId: decision.userId, clientId: pending.clientId });
    const indicator = pending.requestedResource ?? pending.resource;
    grant.addResourceScope(indicator, decision.scopes.join(" "));
    const left = pending.scopes.filter((scope) => !decision.scopes!.includes(scope));
    // Scopes the user unticked are "encountered": not asked about again, not granted (a step-up asks anew).
    if (left.length) grant.rejectResourceScope(indicator, left.join(" "));
    // The MCP scopes are also in oidc-provider's own scope list (clients may register them), which it checks as such.
    grant.addOIDCScope([...(pending.oidcScopes ?? []), ...decision.scopes].join(" "));
    if (left.length) grant.rejectOIDCScope(left.join(" "));
    const grantId = await grant.save();
    const now = Date.now();
    await deps.consents.putConsent({
      id: grantId,
      userId: decision.userId,
      tenantId: decision.tenantId,
      clientId: pending.clientId,
      clientName: pending.clientName,
      registration: pending.registration,
      resource: pending.resource,
      scopes: decision.scopes,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + deps.grantSeconds * 1000).toISOString(),
    });
    // No remembered sign-in: the console's session is the sign-in (consentEveryTime, provider.ts).
    result = { login: { accountId: decision.userId, remember: false }, consent: { grantId } };
  } else {
    result = { error: "access_denied", error_description: "The user did not authorize this client" };
  }
  interaction.result = result;
  await interaction.save(Math.max(1, interaction.exp - Math.floor(Date.now() / 1000)));
  return interaction.returnTo;
}
