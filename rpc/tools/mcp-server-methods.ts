import * as v from "valibot";
import { principalOf } from "../auth.js";
import { UpstreamServerView } from "../views.js";
import { emitEvent } from "../event-sink.js";
import { tenantOrPersonal, type Role } from "../tenants/access.js";
import { recordAudit } from "../audit.js";
import { toolsDomain, type ToolsContext } from "./deps.js";

const tenantId = v.optional(v.pipe(v.string("tenantId must be a string"), v.minLength(1), v.maxLength(128)));

/**
 * An upstream server's name, a tenant's or a shared one: no underscores, so `<server>__<tool>`
 * splits unambiguously, and not `vm`, the VM tools' namespace (docs/mcp.md).
 */
export const ServerName = v.pipe(
  v.string("name must be a string"),
  v.regex(/^[A-Za-z0-9][A-Za-z0-9-]{0,47}$/, "name: 1-48 letters, digits or '-'"),
  v.check((name) => name.toLowerCase() !== "vm", "name: `vm` is reserved for VM tools"),
);

/** Where, how and under which category an upstream server is reached (a tenant's or a shared one). */
export const ServerConnection = {
  url: v.pipe(
    v.string("url must be a string"),
    v.url("url must be an absolute URL"),
    v.regex(/^https?:\/\//i, "url must be http or https"),
    v.maxLength(2048),
  ),
  headers: v.optional(
    v.pipe(
      v.record(
        v.pipe(v.string(), v.regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, "invalid header name")),
        v.pipe(v.string("header values must be strings"), v.maxLength(8192)),
      ),
      v.check((headers) => Object.keys(headers).length <= 32, "at most 32 headers"),
    ),
    {},
  ),
  category: v.optional(v.pipe(v.string(), v.regex(/^[a-z0-9][a-z0-9_-]{0,31}$/, "category: lowercase letters, digits, _ or -")), "mcp"),
};

/**
 * The tenant a server request acts for (docs/architecture.md "Ownership"): the caller's personal tenant, or
 * a tenant they are a member of, with at least `need`, when `tenantId` names it; a non-member
 * gets the same 404 as for a missing tenant (rpc/tenants/access.ts).
 */
async function ownerOf(ctx: ToolsContext, requested: string | undefined, need: Role): Promise<string> {
  return (await tenantOrPersonal(ctx.deps, principalOf(ctx), requested, need)).id;
}

/** Upstream MCP servers whose tools join the catalog (docs/interface.md 4.4 `GET, POST /mcp/servers`). */
export const mcpServerMethods = [
  toolsDomain.method({
    name: "mcp.servers.list",
    summary:
      "The upstream MCP servers of the caller's tenant (or of `tenantId`, a tenant they own) and the ones operators " +
      "shared (`shared: true`), with their health (connecting, healthy, unhealthy), last error and tool count.",
    input: v.object({ tenantId }),
    auth: { kinds: ["session", "gateway_key", "console"] },
    output: v.object({ servers: v.array(UpstreamServerView), count: v.number() }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [
      { surface: "gateway", method: "GET", path: "/mcp/servers" },
      { surface: "console", method: "GET", path: "/mcp/servers" },
    ],
    async handler(params, ctx) {
      const servers = await ctx.deps.upstream.list(await ownerOf(ctx, params.tenantId, "viewer"));
      return { servers, count: servers.length };
    },
  }),

  toolsDomain.method({
    name: "mcp.servers.register",
    summary:
      "Register an upstream MCP server (Streamable HTTP) for the caller's tenant (or `tenantId`, a tenant they own): " +
      "only that tenant sees its tools, as `<name>__<tool>`. Header values are encrypted at rest and never shown. " +
      "Answers 201 after the first connection attempt, with the health it reached: a server that is down is kept and " +
      "retried. 409 when the tenant (or a shared server) has the name.",
    input: v.object({ name: ServerName, ...ServerConnection, tenantId }),
    auth: { kinds: ["session", "gateway_key"] },
    output: UpstreamServerView,
    errors: { CONFLICT: {}, FORBIDDEN: {}, VALIDATION_FAILED: {}, NOT_FOUND: {} },
    http: [{ surface: "gateway", method: "POST", path: "/mcp/servers", status: 201 }],
    async handler(params, ctx) {
      const { tenantId: requested, ...server } = params;
      const tenantId = await ownerOf(ctx, requested, "member");
      const registered = await ctx.deps.upstream.register({ ...server, tenantId, createdBy: principalOf(ctx).userId });
      emitEvent(ctx.deps, tenantId, "mcp.server.registered", { name: server.name, url: server.url });
      // Its credentials (headers, tokens) are redacted by name (rpc/audit.ts).
      await recordAudit(ctx, { action: "mcp_server.registered", target: server.name, tenantId, changes: { ...server } });
      return registered;
    },
  }),

  toolsDomain.method({
    name: "mcp.servers.delete",
    summary:
      "Unregister one of the tenant's upstream MCP servers; its tools leave the catalog on every instance. Another " +
      "tenant's server is the same 404 as a missing one; a shared server is 403.",
    input: v.object({ name: v.pipe(v.string(), v.minLength(1), v.maxLength(48)), tenantId }),
    auth: { kinds: ["session", "gateway_key"] },
    output: v.object({ success: v.boolean(), name: v.string() }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "DELETE", path: "/mcp/servers/:name" }],
    async handler(params, ctx) {
      const tenantId = await ownerOf(ctx, params.tenantId, "owner");
      await ctx.deps.upstream.remove(tenantId, params.name);
      // Its OAuth authorization goes with it: a server registered again under the name starts without one.
      await ctx.deps.upstreamOAuth.delete(tenantId, params.name);
      emitEvent(ctx.deps, tenantId, "mcp.server.removed", { name: params.name });
      await recordAudit(ctx, { action: "mcp_server.removed", target: params.name, tenantId });
      return { success: true, name: params.name };
    },
  }),
];
