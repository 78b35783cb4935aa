import * as v from "valibot";
import { LOCAL_ADMIN } from "../auth.js";
import { ServiceError } from "../errors.js";
import { nowIso } from "../../storage/ids.js";
import type { McpServerRecord } from "../../storage/repos/mcp-servers.js";
import { ServerConnection, ServerName } from "./mcp-server-methods.js";
import { toolsDomain } from "./deps.js";

const SharedServerView = v.object({
  name: v.string(),
  url: v.string(),
  category: v.string(),
  headers: v.array(v.string()),
  createdAt: v.string(),
});
const sharedView = (record: McpServerRecord) => ({
  name: record.name,
  url: record.url,
  category: record.category,
  headers: Object.keys(record.headers),
  createdAt: record.createdAt,
});

export const operatorMcpServersShare = toolsDomain.method({
  name: "operator.mcp.servers.share",
  summary: "Shares an upstream MCP server with every tenant; 409 when the name is already shared or a tenant uses it.",
  input: v.object({ name: ServerName, ...ServerConnection }),
  auth: LOCAL_ADMIN,
  internal: true,
  http: [],
  output: v.object({ ...SharedServerView.entries, shared: v.literal(true) }),
  errors: { CONFLICT: {}, VALIDATION_FAILED: {} },
  async handler(params, ctx) {
    const record: McpServerRecord = { ...params, tenantId: null, createdBy: ctx.principal.userId, createdAt: nowIso() };
    if (!(await ctx.deps.mcpServers.create(record)))
      throw new ServiceError("CONFLICT", `An MCP server named ${params.name} is already shared, or a tenant uses the name`);
    await ctx.deps.mcpServers.announce({ op: "added", tenantId: null, name: record.name, from: ctx.principal.userId });
    ctx.deps.log.info({ requestId: ctx.requestId, event: "mcp.server.shared", name: record.name, by: ctx.principal.userId });
    const { name, url, category, headers, createdAt } = sharedView(record);
    return { name, url, category, headers, shared: true as const, createdAt };
  },
});

export const operatorMcpServersShared = toolsDomain.method({
  name: "operator.mcp.servers.shared",
  summary: "The servers shared with every tenant (header names only).",
  input: v.object({}),
  auth: LOCAL_ADMIN,
  internal: true,
  http: [],
  output: v.object({ servers: v.array(SharedServerView) }),
  async handler(_params, ctx) {
    return { servers: (await ctx.deps.mcpServers.list()).filter((record) => record.tenantId === null).map(sharedView) };
  },
});

export const operatorMcpServersUnshare = toolsDomain.method({
  name: "operator.mcp.servers.unshare",
  summary: "Removes a shared server from every tenant's catalog.",
  input: v.object({ name: v.pipe(v.string("name must be a string"), v.minLength(1, "name is required"), v.maxLength(48)) }),
  auth: LOCAL_ADMIN,
  internal: true,
  http: [],
  output: v.object({ success: v.boolean(), name: v.string() }),
  errors: { NOT_FOUND: {} },
  async handler(params, ctx) {
    if (!(await ctx.deps.mcpServers.get(null, params.name)))
      throw new ServiceError("NOT_FOUND", `No shared MCP server named ${params.name}`);
    await ctx.deps.mcpServers.remove(null, params.name);
    await ctx.deps.mcpServers.announce({ op: "removed", tenantId: null, name: params.name, from: ctx.principal.userId });
    ctx.deps.log.info({ requestId: ctx.requestId, event: "mcp.server.unshared", name: params.name, by: ctx.principal.userId });
    return { success: true, name: params.name };
  },
});

/**
 * Upstream MCP servers shared with every tenant (docs/mcp.md), as the admin command manages
 * them: internal methods, reached only by dispatch from `npm run admin` as the local
 * administrator, never over `/rpc`, REST or OpenAPI. A shared server is held to the same name,
 * URL, header and category rules as a tenant's (`mcp.servers.register`). It is stored and
 * announced; every instance's bridge connects it (Redis: at once; fs: within 15 s).
 */
export const sharedServerMethods = [operatorMcpServersShare, operatorMcpServersShared, operatorMcpServersUnshare];
