import { randomBytes } from "node:crypto";
import * as v from "valibot";
import { MCP_SCOPES, parseMcpResource, type McpScope } from "../credentials/oauth-resource.js";
import { reaches, tenantsOf } from "../tenants/access.js";
import { Timestamp } from "../views.js";
import { nowIso, sha256Hex } from "../../storage/ids.js";
import type { PendingAuthorization } from "../../storage/repos/oauth-consents.js";
import { oauthDomain, type OAuthContext } from "./deps.js";

/** What each scope lets a client do, in the words the consent page shows (docs/mcp.md "Scopes"). */
export const SCOPE_DESCRIPTIONS: Record<McpScope, string> = {
  "mcp:read": "See the tools, resources and prompts it offers, read resources and get prompts",
  "mcp:call": "Call tools on your behalf",
};

/** The scope every token carries: without it a client reaches nothing (the endpoint's gate needs it). */
const REQUIRED_SCOPE: McpScope = "mcp:read";

const Uid = v.pipe(v.string("uid must be a string"), v.regex(/^[\w-]{10,64}$/, "not an authorization request id"));

const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

const AuthorizationView = v.object({
  uid: v.string(),
  client: v.object({
    id: v.string(),
    name: v.string(),
    uri: v.optional(v.string()),
    logoUri: v.optional(v.string()),
    registration: v.pipe(v.string(), v.description("metadata-document (its client_id is a URL), dynamic (RFC 7591) or operator")),
    applicationType: v.string(),
    redirectUri: v.string(),
    redirectHost: v.pipe(v.string(), v.description("Where the browser is sent back: the page names it (MCP security considerations)")),
    loopbackRedirect: v.pipe(
      v.boolean(),
      v.description("The redirect goes to this computer (localhost): any local program could be the client"),
    ),
  }),
  resource: v.object({
    url: v.string(),
    server: v.optional(
      v.pipe(v.string(), v.description("The upstream server whose own endpoint the tokens reach; absent for the whole catalog")),
    ),
  }),
  scopes: v.array(v.object({ name: v.string(), description: v.string(), required: v.boolean() })),
  tenants: v.array(v.object({ id: v.string(), name: v.string(), slug: v.string(), role: v.string() })),
  expiresAt: Timestamp,
  decided: v.boolean(),
});

function view(pending: PendingAuthorization, tenants: { id: string; name: string; slug: string; role: string }[]) {
  const redirect = new URL(pending.redirectUri);
  const server = parseMcpResource(pending.resource, () => true)?.server;
  return {
    uid: pending.uid,
    client: {
      id: pending.clientId,
      name: pending.clientName,
      ...(pending.clientUri ? { uri: pending.clientUri } : {}),
      ...(pending.logoUri ? { logoUri: pending.logoUri } : {}),
      registration: pending.registration,
      applicationType: pending.applicationType,
      redirectUri: pending.redirectUri,
      redirectHost: redirect.host,
      loopbackRedirect: LOOPBACK_HOSTS.has(redirect.hostname),
    },
    resource: { url: pending.resource, ...(server === undefined ? {} : { server }) },
    scopes: pending.scopes.map((name) => ({
      name,
      description: SCOPE_DESCRIPTIONS[name as McpScope] ?? name,
      required: name === REQUIRED_SCOPE,
    })),
    tenants,
    expiresAt: pending.expiresAt,
    decided: pending.decision !== undefined,
  };
}

/** The tenants the signed-in user may give a client access to: those where they may use tools (member or above). */
async function usableTenants(ctx: OAuthContext & { principal: NonNullable<OAuthContext["principal"]> }) {
  const all = await tenantsOf(ctx.deps, ctx.principal);
  return all
    .filter(({ role }) => role !== "viewer")
    .map(({ tenant, role }) => ({ id: tenant.id, name: tenant.name, slug: tenant.slug, role }));
}

const NOT_FOUND = "No such authorization request: it expired, was answered, or belongs to another sign-in";

export const authorizationMethods = [
  oauthDomain.method({
    name: "oauth.authorizations.get",
    summary:
      'The consent page\'s view of an authorization request (docs/mcp.md "Sign-in and consent"): the client, where it sends the browser back, ' +
      "the resource and scopes it asks for, and the tenants the signed-in user may choose. The first user to open it is the only one who sees it.",
    input: v.object({ uid: Uid }),
    auth: { kinds: ["console"] },
    output: AuthorizationView,
    errors: { NOT_FOUND: { message: NOT_FOUND } },
    http: [{ surface: "console", method: "GET", path: "/oauth/authorizations/:uid" }],
    async handler(params, ctx) {
      const pending = await ctx.deps.consents.viewPending(params.uid, ctx.principal.userId);
      if (!pending) return ctx.fail("NOT_FOUND");
      ctx.responseHeaders.set("cache-control", "no-store");
      return view(pending, await usableTenants(ctx));
    },
  }),

  oauthDomain.method({
    name: "oauth.authorizations.decide",
    summary:
      "Approves or denies an authorization request from the consent page, for one tenant and the scopes left ticked. Answers where the " +
      "browser goes next: the authorization server applies the decision there, once, for the browser that started the request.",
    input: v.object({
      uid: Uid,
      approve: v.boolean("approve must be a boolean"),
      tenantId: v.optional(v.pipe(v.string("tenantId must be a string"), v.minLength(1), v.maxLength(128))),
      scopes: v.optional(v.pipe(v.array(v.picklist(MCP_SCOPES, "an unknown scope")), v.maxLength(MCP_SCOPES.length))),
    }),
    auth: { kinds: ["console"] },
    output: v.object({ redirectTo: v.pipe(v.string(), v.description("Open this in the same browser to finish")) }),
    errors: {
      NOT_FOUND: { message: NOT_FOUND },
      CONFLICT: { message: "This authorization request was answered already" },
      VALIDATION_FAILED: {},
    },
    http: [{ surface: "console", method: "POST", path: "/oauth/authorizations/:uid" }],
    async handler(params, ctx) {
      const userId = ctx.principal.userId;
      const pending = await ctx.deps.consents.getPending(params.uid);
      if (!pending || pending.viewer !== userId) return ctx.fail("NOT_FOUND");
      if (pending.decision) return ctx.fail("CONFLICT");
      const nonce = randomBytes(32).toString("base64url");
      let tenantId: string | undefined;
      let scopes: string[] | undefined;
      if (params.approve) {
        tenantId = params.tenantId;
        if (!tenantId) return ctx.fail("VALIDATION_FAILED", "tenantId is required to approve: the tenant whose tools the client reaches");
        // The same answer for a tenant that does not exist and one the user is not a member of.
        if (!(await reaches(ctx.deps, userId, tenantId, "member")))
          return ctx.fail("VALIDATION_FAILED", `You cannot give access to tenant ${tenantId}: it is not one where you use tools`);
        const server = parseMcpResource(pending.resource, () => true)?.server;
        if (server !== undefined && !ctx.deps.upstream.find({ tenantId }, server))
          return ctx.fail("VALIDATION_FAILED", `The tenant has no MCP server named ${server}: choose the tenant that registered it`);
        scopes = params.scopes ?? pending.scopes;
        const unknown = scopes.filter((scope) => !pending.scopes.includes(scope));
        if (unknown.length) return ctx.fail("VALIDATION_FAILED", `The client did not ask for ${unknown.join(", ")}`);
        if (!scopes.includes(REQUIRED_SCOPE))
          return ctx.fail("VALIDATION_FAILED", `${REQUIRED_SCOPE} cannot be left out: without it the client reaches nothing`);
      }
      const decided = await ctx.deps.consents.decide(params.uid, {
        userId,
        approve: params.approve,
        ...(tenantId === undefined ? {} : { tenantId }),
        ...(scopes === undefined ? {} : { scopes }),
        nonceHash: sha256Hex(nonce),
        decidedAt: nowIso(),
      });
      if (!decided) return ctx.fail("CONFLICT");
      ctx.responseHeaders.set("cache-control", "no-store");
      return { redirectTo: `/oauth/interaction/${encodeURIComponent(params.uid)}/confirm?nonce=${nonce}` };
    },
  }),
];
