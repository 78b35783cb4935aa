import type { IncomingMessage, ServerResponse } from "node:http";
import { fromNodeHandler, getRequestIP, type H3, type H3Event } from "h3";
import { RateLimiterRes } from "rate-limiter-flexible";
import type { Dispatcher } from "../../rpc/dispatcher.js";
import type { Transport } from "../../facade/transport/mount.js";
import { MCP_SCOPES } from "../../rpc/credentials/oauth-resource.js";
import type { ToolBridge } from "../tool-bridge.js";
import { AuthorizationServer } from "./host.js";
import { ConfirmRefused, confirmDecision } from "./interaction.js";
import { issuerOf, nodeRequestOf } from "./origins.js";
import { errorPage, PAGE_HEADERS } from "./pages.js";
import { GRANT_SECONDS, ROUTES } from "./provider.js";

/** The well-known addresses of the authorization server's metadata (RFC 8414, OpenID Connect Discovery). */
export const AS_METADATA_PATHS = ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"];
const DISCOVERY_ROUTE = "/.well-known/openid-configuration";

/**
 * The authorization server's endpoints (docs/mcp.md "Authorization server"): oidc-provider's
 * Node handler under /oauth and at the metadata addresses, and the step that applies a consent
 * page's decision. The consent page itself is the console's (facade/console), the decisions
 * are dispatcher methods (rpc/oauth).
 */
export function oauthTransport(bridge: ToolBridge): Transport {
  return (app, dispatcher) => mountOAuth(app, dispatcher, bridge);
}

function mountOAuth(app: H3, dispatcher: Dispatcher, bridge: ToolBridge): void {
  const services = dispatcher.ports;
  const { config, log } = services;
  const { records, consents, keys, fetch } = bridge.oauth;
  const server = new AuthorizationServer({ config, log, ring: services.oauthKeys, keys, users: services.users, records, consents, fetch });
  const registrations = services.store.limiter({
    name: "oauth-register",
    points: config.OAUTH_REGISTRATIONS_PER_HOUR,
    durationSeconds: 3600,
  });

  /** oidc-provider for this request's issuer, on the Node request, the path given as `path` (a metadata alias). */
  const protocol = (rewrite?: string) =>
    nodeHandler(async (req, res) => {
      const started = performance.now();
      const path = (req.url ?? "").split("?")[0]!;
      res.once("finish", () =>
        log.info({
          event: "oauth.request",
          method: req.method,
          path,
          status: res.statusCode,
          durationMs: Math.round(performance.now() - started),
        }),
      );
      try {
        if (rewrite) req.url = rewrite;
        if (req.method === "GET" && path === ROUTES.authorization) prepareAuthorization(req);
        if (req.method === "POST" && path === ROUTES.registration && !(await admitRegistration(req, res))) return;
        const { callback } = await server.forIssuer(issuerOf(config, req));
        await callback(req, res);
      } catch (error) {
        log.error({ event: "oauth.error", path, error: error instanceof Error ? error.message : String(error) });
        if (!res.headersSent) {
          res.writeHead(503, { "content-type": "application/json", "cache-control": "no-store" });
          res.end(
            JSON.stringify({ error: "temporarily_unavailable", error_description: "The authorization server is unavailable; try again" }),
          );
        }
      }
    });

  /** RFC 7591 registrations per address and hour (OAUTH_REGISTRATIONS_PER_HOUR), shared by the instances on one Redis. */
  async function admitRegistration(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    const ip = req.socket.remoteAddress ?? "unknown";
    try {
      await registrations.consume(ip);
      return true;
    } catch (refusal) {
      if (!(refusal instanceof RateLimiterRes)) throw refusal;
      res.writeHead(429, {
        "content-type": "application/json",
        "retry-after": String(Math.max(1, Math.ceil(refusal.msBeforeNext / 1000))),
        "cache-control": "no-store",
      });
      res.end(
        JSON.stringify({ error: "too_many_requests", error_description: "Too many client registrations from this address; try later" }),
      );
      return false;
    }
  }

  app.all("/oauth/**", protocol());
  if (config.OAUTH_DISCOVERY) for (const path of AS_METADATA_PATHS) app.on("GET", path, protocol(DISCOVERY_ROUTE));

  app.on("GET", "/oauth/interaction/:uid/confirm", async (event: H3Event) => {
    const uid = event.context.params?.uid ?? "";
    const nonce = event.url.searchParams.get("nonce") ?? "";
    const req = nodeRequestOf(event);
    const res = (event.runtime as { node: { res: ServerResponse } }).node.res;
    try {
      const { provider } = await server.forIssuer(issuerOf(config, req));
      const location = await confirmDecision(provider, req, res, uid, nonce, { consents, grantSeconds: GRANT_SECONDS });
      log.info({ event: "oauth.consent_applied", ip: getRequestIP(event) });
      return new Response(null, { status: 303, headers: { location, "cache-control": "no-store", "referrer-policy": "no-referrer" } });
    } catch (error) {
      if (!(error instanceof ConfirmRefused)) throw error;
      return new Response(errorPage("This authorization cannot go on", error.message), { status: 400, headers: PAGE_HEADERS });
    }
  });
}

/** h3's adapter for a Node handler; srvx serves plain node:http here (facade/server.ts), never HTTP/2. */
function nodeHandler(handler: (req: IncomingMessage, res: ServerResponse) => Promise<void>) {
  return fromNodeHandler(handler as unknown as Parameters<typeof fromNodeHandler>[0]);
}

/**
 * Before oidc-provider sees an authorization request: its own sign-in cookie is dropped (the
 * console's session is the sign-in; a cookie left from another user's authorization must not
 * count), and a request naming no MCP scope asks for all of them (clients that send no `scope`
 * still get a usable token; the consent page lets the user narrow it).
 */
function prepareAuthorization(req: IncomingMessage): void {
  const cookie = req.headers.cookie;
  if (cookie) {
    const kept = cookie
      .split(";")
      .map((part) => part.trim())
      .filter((part) => part && !/^_session(\.|=)/.test(part));
    if (kept.length) req.headers.cookie = kept.join("; ");
    else delete req.headers.cookie;
  }
  const url = new URL(req.url ?? "/", "http://authorization.invalid");
  const scopes = (url.searchParams.get("scope") ?? "").split(" ").filter(Boolean);
  if (!scopes.some((scope) => (MCP_SCOPES as readonly string[]).includes(scope))) {
    url.searchParams.set("scope", [...scopes, ...MCP_SCOPES].join(" "));
    req.url = url.pathname + url.search;
  }
}
