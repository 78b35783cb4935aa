import { randomBytes } from "node:crypto";
import * as v from "valibot";
import { principalOf } from "../auth.js";
import { RawReply } from "../define.js";
import { emitEvent } from "../event-sink.js";
import { tenantOrPersonal } from "../tenants/access.js";
import { Timestamp } from "../views.js";
import { nowIso } from "../../storage/ids.js";
import { beginUpstreamAuthorization, completeUpstreamAuthorization, gatewayClientMetadata } from "./upstream-oauth.js";
import { toolsDomain, type ToolsContext } from "./deps.js";

const tenantId = v.optional(v.pipe(v.string("tenantId must be a string"), v.minLength(1), v.maxLength(128)));
const ServerRef = { name: v.pipe(v.string("name must be a string"), v.minLength(1), v.maxLength(48)), tenantId };

/** How long a started authorization waits for its callback. */
const FLOW_MS = 10 * 60_000;
const CALLBACK_PATH = "/api/mcp/oauth/callback";
const CLIENT_DOCUMENT_PATH = "/api/mcp/oauth/client.json";

/** Where the gateway is reached: PUBLIC_URL, else the Host the request came to (a local deployment). */
function originOf(ctx: ToolsContext, host: string | undefined): string {
  if (ctx.deps.config.PUBLIC_URL) return new URL(ctx.deps.config.PUBLIC_URL).origin;
  if (!host) throw new Error("no Host header");
  return `http://${host}`;
}

/** The gateway's Client ID Metadata Document URL: only over https (the draft requires it). */
const clientDocumentOf = (origin: string) => (origin.startsWith("https:") ? origin + CLIENT_DOCUMENT_PATH : undefined);

function page(status: number, title: string, message: string): RawReply {
  const escaped = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
  const head = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escaped(title)}</title></head>`;
  const html = `${head}<body><main><h1>${escaped(title)}</h1><p>${escaped(message)}</p></main></body></html>`;
  return new RawReply(
    status,
    new Headers({
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
      "cache-control": "no-store",
      "referrer-policy": "no-referrer",
    }),
    new TextEncoder().encode(html),
  );
}

const AuthorizationView = v.object({
  connected: v.boolean(),
  issuer: v.optional(v.string()),
  registration: v.optional(v.string()),
  scope: v.optional(v.string()),
  expiresAt: v.optional(Timestamp),
  connectedAt: v.optional(Timestamp),
  connectedBy: v.optional(v.string()),
});

/**
 * Upstream MCP servers that need OAuth (docs/mcp.md "Upstream servers that need OAuth"): a
 * member of the tenant connects the gateway to the server's authorization server in their
 * browser, once for the tenant; the tokens are kept sealed per tenant and server, refreshed by
 * one instance at a time, and sent upstream as the server's Authorization, beside (or instead
 * of) its static headers. The callback completes only for the signed-in console user who
 * started it, in their browser.
 */
export const upstreamOAuthMethods = [
  toolsDomain.method({
    name: "mcp.servers.oauth.start",
    summary:
      "Starts authorizing the gateway at one of the tenant's upstream MCP servers that asks for OAuth: answers the URL to open in a browser " +
      "signed in to this console; the server is connected once the authorization server sends the browser back.",
    input: v.object({ ...ServerRef, host: v.optional(v.pipe(v.string(), v.maxLength(300))) }),
    auth: { kinds: ["session", "gateway_key", "console"] },
    output: v.object({ authorizationUrl: v.string(), registration: v.string(), expiresAt: Timestamp }),
    errors: { NOT_FOUND: { message: "No MCP server of this name in the tenant" }, CONFLICT: {}, BAD_GATEWAY: {}, FORBIDDEN: {} },
    http: [
      { surface: "gateway", method: "POST", path: "/mcp/servers/:name/oauth", headerParams: { host: "host" } },
      { surface: "console", method: "POST", path: "/mcp/servers/:name/oauth", headerParams: { host: "host" } },
    ],
    async handler(params, ctx) {
      const tenant = (await tenantOrPersonal(ctx.deps, principalOf(ctx), params.tenantId, "member")).id;
      const record = await ctx.deps.mcpServers.get(tenant, params.name);
      if (!record) return ctx.fail("NOT_FOUND");
      const origin = originOf(ctx, params.host);
      const state = randomBytes(32).toString("base64url");
      const { authorizationUrl, flow } = await beginUpstreamAuthorization({
        serverUrl: record.url,
        redirectUri: origin + CALLBACK_PATH,
        ...(clientDocumentOf(origin) ? { clientMetadataUrl: clientDocumentOf(origin)! } : {}),
        state,
        fetch: ctx.deps.oauthFetch,
      });
      const expiresAt = new Date(Date.now() + FLOW_MS).toISOString();
      await ctx.deps.upstreamOAuth.putFlow(state, {
        ...flow,
        tenantId: tenant,
        server: record.name,
        userId: ctx.principal.userId,
        expiresAt,
      });
      return { authorizationUrl: authorizationUrl.toString(), registration: flow.registration, expiresAt };
    },
  }),

  toolsDomain.method({
    name: "mcp.oauth.callback",
    summary:
      "Where an upstream authorization server sends the browser back: completes the authorization the signed-in user started and connects the server.",
    input: v.object({
      state: v.pipe(v.string("state must be a string"), v.minLength(1), v.maxLength(200)),
      code: v.optional(v.pipe(v.string(), v.maxLength(4096))),
      iss: v.optional(v.pipe(v.string(), v.maxLength(2048))),
      error: v.optional(v.pipe(v.string(), v.maxLength(200))),
      error_description: v.optional(v.pipe(v.string(), v.maxLength(1000))),
    }),
    auth: { kinds: ["console"] },
    output: v.pipe(v.unknown(), v.description("A small HTML page saying whether the server is connected")),
    http: [{ surface: "console", method: "GET", path: "/mcp/oauth/callback" }],
    async handler(params, ctx) {
      const flow = await ctx.deps.upstreamOAuth.peekFlow(params.state);
      // Another user's flow is left alone, and answered like an unknown one (docs/mcp.md: no login CSRF).
      if (!flow || flow.userId !== ctx.principal.userId || !(await ctx.deps.upstreamOAuth.takeFlow(params.state)))
        return page(
          400,
          "Authorization not found",
          "It expired, was completed already, or was started by someone else. Start again from the console.",
        );
      if (params.error || !params.code)
        return page(
          400,
          "Not authorized",
          `The authorization server answered: ${params.error ?? "no code"} ${params.error_description ?? ""}`.trim(),
        );
      const tokens = await completeUpstreamAuthorization(
        flow,
        { code: params.code, ...(params.iss ? { iss: params.iss } : {}) },
        ctx.deps.oauthFetch,
      );
      await ctx.deps.upstreamOAuth.put(flow.tenantId, flow.server, {
        issuer: flow.issuer,
        authorizationServerUrl: flow.authorizationServerUrl,
        ...(flow.resource ? { resource: flow.resource } : {}),
        client: flow.client,
        registration: flow.registration,
        metadata: flow.metadata,
        tokens,
        connectedBy: ctx.principal.userId,
        connectedAt: nowIso(),
      });
      await ctx.deps.upstreamOAuth.announce({ tenantId: flow.tenantId, server: flow.server });
      emitEvent(ctx.deps, flow.tenantId, "mcp.server.authorized", { name: flow.server, issuer: flow.issuer, userId: ctx.principal.userId });
      return page(
        200,
        `${flow.server} is connected`,
        "The gateway may now use this MCP server for your tenant. You can close this window.",
      );
    },
  }),

  toolsDomain.method({
    name: "mcp.servers.oauth.get",
    summary:
      "Whether the gateway holds an authorization for one of the tenant's upstream servers, from which issuer, until when (never the tokens).",
    input: v.object(ServerRef),
    auth: { kinds: ["session", "gateway_key", "console"] },
    output: AuthorizationView,
    errors: { NOT_FOUND: { message: "No MCP server of this name in the tenant" }, FORBIDDEN: {} },
    http: [
      { surface: "gateway", method: "GET", path: "/mcp/servers/:name/oauth" },
      { surface: "console", method: "GET", path: "/mcp/servers/:name/oauth" },
    ],
    async handler(params, ctx) {
      const tenant = (await tenantOrPersonal(ctx.deps, principalOf(ctx), params.tenantId, "viewer")).id;
      if (!(await ctx.deps.mcpServers.get(tenant, params.name))) return ctx.fail("NOT_FOUND");
      const authorization = await ctx.deps.upstreamOAuth.get(tenant, params.name);
      if (!authorization) return { connected: false };
      return {
        connected: true,
        issuer: authorization.issuer,
        registration: authorization.registration,
        ...(authorization.tokens.scope ? { scope: authorization.tokens.scope } : {}),
        ...(authorization.tokens.expiresAt ? { expiresAt: new Date(authorization.tokens.expiresAt).toISOString() } : {}),
        connectedAt: authorization.connectedAt,
        connectedBy: authorization.connectedBy,
      };
    },
  }),

  toolsDomain.method({
    name: "mcp.servers.oauth.delete",
    summary:
      "Forgets the gateway's authorization at an upstream server (revoked there when it offers RFC 7009); the server then asks again.",
    input: v.object(ServerRef),
    auth: { kinds: ["session", "gateway_key", "console"] },
    output: v.object({ success: v.boolean(), name: v.string() }),
    errors: { NOT_FOUND: { message: "No MCP server of this name in the tenant" }, FORBIDDEN: {} },
    http: [
      { surface: "gateway", method: "DELETE", path: "/mcp/servers/:name/oauth" },
      { surface: "console", method: "DELETE", path: "/mcp/servers/:name/oauth" },
    ],
    async handler(params, ctx) {
      const tenant = (await tenantOrPersonal(ctx.deps, principalOf(ctx), params.tenantId, "member")).id;
      if (!(await ctx.deps.mcpServers.get(tenant, params.name))) return ctx.fail("NOT_FOUND");
      const authorization = await ctx.deps.upstreamOAuth.get(tenant, params.name);
      await ctx.deps.upstreamOAuth.delete(tenant, params.name);
      await ctx.deps.upstreamOAuth.announce({ tenantId: tenant, server: params.name });
      const revocation = authorization?.metadata.revocation_endpoint;
      const token = authorization?.tokens.refresh_token ?? authorization?.tokens.access_token;
      if (authorization && typeof revocation === "string" && token) {
        // Best effort: the tokens are forgotten here whatever the authorization server answers.
        await ctx.deps
          .oauthFetch(revocation, {
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({ token, client_id: authorization.client.client_id }).toString(),
            signal: AbortSignal.timeout(ctx.deps.config.GATEWAY_TIMEOUT_SECONDS * 1000),
          })
          .then((res) => res.body?.cancel())
          .catch(() => undefined);
      }
      return { success: true, name: params.name };
    },
  }),

  toolsDomain.method({
    name: "mcp.oauth.client",
    summary:
      "The gateway's Client ID Metadata Document, which upstream authorization servers fetch to know it as a client (published when PUBLIC_URL is https).",
    input: v.object({}),
    auth: "public",
    output: v.object({
      client_id: v.optional(v.string()),
      client_name: v.string(),
      redirect_uris: v.array(v.string()),
      grant_types: v.array(v.string()),
      response_types: v.array(v.string()),
      token_endpoint_auth_method: v.string(),
      application_type: v.string(),
    }),
    errors: { NOT_FOUND: { message: "Published only when PUBLIC_URL is an https URL" } },
    http: [{ surface: "console", method: "GET", path: "/mcp/oauth/client.json" }],
    async handler(_params, ctx) {
      const origin = ctx.deps.config.PUBLIC_URL ? new URL(ctx.deps.config.PUBLIC_URL).origin : undefined;
      const document = origin && clientDocumentOf(origin);
      if (!document) return ctx.fail("NOT_FOUND");
      ctx.responseHeaders.set("cache-control", "public, max-age=3600");
      return gatewayClientMetadata(origin + CALLBACK_PATH, document);
    },
  }),
];
