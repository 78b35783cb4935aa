import * as v from "valibot";
import { parseMcpResource } from "../credentials/oauth-resource.js";
import { emitEvent } from "../event-sink.js";
import { Timestamp } from "../views.js";
import type { OAuthConsent } from "../../storage/repos/oauth-consents.js";
import { oauthDomain, type OAuthContext } from "./deps.js";

const ConsentView = v.object({
  id: v.string(),
  client: v.object({ id: v.string(), name: v.string(), registration: v.string() }),
  tenant: v.object({ id: v.string(), name: v.pipe(v.string(), v.description("Empty when the tenant is gone")) }),
  resource: v.object({ url: v.string(), server: v.optional(v.string()) }),
  scopes: v.array(v.string()),
  createdAt: Timestamp,
  expiresAt: Timestamp,
});

async function view(ctx: OAuthContext, consent: OAuthConsent) {
  const tenant = await ctx.deps.tenants.getTenant(consent.tenantId);
  const server = parseMcpResource(consent.resource, () => true)?.server;
  return {
    id: consent.id,
    client: { id: consent.clientId, name: consent.clientName, registration: consent.registration },
    tenant: { id: consent.tenantId, name: tenant?.name ?? "" },
    resource: { url: consent.resource, ...(server === undefined ? {} : { server }) },
    scopes: consent.scopes,
    createdAt: consent.createdAt,
    expiresAt: consent.expiresAt,
  };
}

const ConsentId = v.pipe(v.string("consent_id must be a string"), v.minLength(1), v.maxLength(128));

export const consentMethods = [
  oauthDomain.method({
    name: "oauth.consents.list",
    summary: 'The OAuth clients the caller authorized (docs/mcp.md "Consents"): each with its tenant, resource and scopes, oldest first.',
    input: v.object({}),
    auth: { kinds: ["session", "gateway_key", "console"] },
    output: v.object({ consents: v.array(ConsentView), count: v.number() }),
    http: [
      { surface: "gateway", method: "GET", path: "/oauth/consents" },
      { surface: "console", method: "GET", path: "/oauth/consents" },
    ],
    async handler(_params, ctx) {
      const consents = await Promise.all((await ctx.deps.consents.listConsents(ctx.principal.userId)).map((consent) => view(ctx, consent)));
      return { consents, count: consents.length };
    },
  }),

  oauthDomain.method({
    name: "oauth.consents.revoke",
    summary:
      "Revokes a consent: its refresh tokens stop working and its access tokens are refused at once, on every instance. Another user's " +
      "consent is the same 404 as a missing one.",
    input: v.object({ consent_id: ConsentId }),
    auth: { kinds: ["session", "gateway_key", "console"] },
    output: v.object({ success: v.boolean(), id: v.string() }),
    errors: { NOT_FOUND: { message: "No such consent of yours" } },
    http: [
      { surface: "gateway", method: "DELETE", path: "/oauth/consents/:consent_id" },
      { surface: "console", method: "DELETE", path: "/oauth/consents/:consent_id" },
    ],
    async handler(params, ctx) {
      const consent = await ctx.deps.consents.getConsent(params.consent_id);
      if (!consent || consent.userId !== ctx.principal.userId) return ctx.fail("NOT_FOUND");
      // The grant first: from then on no refresh token of it works, whatever happens next.
      await ctx.deps.records.revokeGrant(consent.id);
      await ctx.deps.consents.deleteConsent(consent);
      emitEvent(ctx.deps, consent.tenantId, "oauth.consent.revoked", {
        consentId: consent.id,
        clientId: consent.clientId,
        userId: consent.userId,
      });
      return { success: true, id: consent.id };
    },
  }),
];
