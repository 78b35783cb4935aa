import * as v from "valibot";
import { principalOf, type Principal } from "../auth.js";
import { ServiceError } from "../errors.js";
import { executeTool, toolView } from "./execute.js";
import { visibleTool, visibleTools } from "./visible-tools.js";
import { ToolResultView, ToolView } from "../views.js";
import { NAMESPACE_SEPARATOR } from "./sources.js";
import {
  complete,
  federatedCapabilities,
  getPrompt,
  listPrompts,
  listResources,
  listResourceTemplates,
  readResource,
  requireVisibleServer,
  subscribe,
  type FederationCall,
} from "./mcp-federation.js";
import { toolsDomain } from "./deps.js";
import { admitAccessToken } from "./access-token.js";

const category = v.optional(v.pipe(v.string("category must be a string"), v.minLength(1), v.maxLength(64)));
/** A server's own endpoint (`/bridge/mcp/servers/{name}/`): that server only, with its own names. */
const upstreamServer = v.optional(v.pipe(v.string("server must be a string"), v.minLength(1), v.maxLength(48)));
const ResourceUri = v.pipe(v.string("uri must be a string"), v.minLength(1, "uri is required"), v.maxLength(4096));
/** One federated MCP request: the caller, the server's own endpoint if any, the request's signal. */
const federation = (ctx: { principal: Principal; signal: AbortSignal }, server: string | undefined): FederationCall => ({
  principal: ctx.principal,
  server,
  signal: ctx.signal,
});
/**
 * Who reaches the MCP endpoints: the Gateway's credentials, and access tokens of the
 * authorization server holding `mcp:read` (docs/mcp.md "Scopes"; sessions and keys hold every scope).
 */
const MCP_AUTH = { kinds: ["session", "gateway_key", "service", "oauth"], scopes: ["mcp:read"] } as const;
const mcpInternal = { auth: MCP_AUTH, internal: true, http: [] } as const;
const toolName = v.pipe(v.string("tool must be a string"), v.minLength(1, "tool is required"), v.maxLength(256));

export const mcpToolsList = toolsDomain.method({
  name: "mcp.tools.list",
  summary: "Every tool of the catalog (built-ins, upstream MCP servers, connected VMs), optionally of one category.",
  input: v.object({ category }),
  auth: { kinds: ["session", "gateway_key"] },
  output: v.object({ tools: v.array(ToolView), count: v.number() }),
  policies: { rateLimit: "bridge" },
  http: [
    { surface: "gateway", method: "GET", path: "/mcp/tools" },
    { surface: "bridge", method: "GET", path: "/v1/mcp/tools" },
  ],
  async handler(params, ctx) {
    // Another tenant's VM tools are not listed (rpc/tools/visible-tools.ts).
    const tools = await visibleTools(ctx.deps, principalOf(ctx), { category: params.category });
    return { tools: tools.map(toolView), count: tools.length };
  },
});

export const mcpToolsGet = toolsDomain.method({
  name: "mcp.tools.get",
  summary: "One tool of the catalog with its JSON Schema; 404 for an unknown name.",
  input: v.object({ name: toolName }),
  auth: { kinds: ["session", "gateway_key"] },
  output: ToolView,
  errors: { NOT_FOUND: {} },
  http: [{ surface: "gateway", method: "GET", path: "/mcp/tools/:name" }],
  async handler(params, ctx) {
    const tool = await visibleTool(ctx.deps, principalOf(ctx), params.name);
    if (!tool) throw new ServiceError("NOT_FOUND", `Unknown tool: ${params.name}`);
    return toolView(tool);
  },
});

export const mcpToolsExecute = toolsDomain.method({
  name: "mcp.tools.execute",
  summary:
    "Run a catalog tool (docs/interface.md 2.7: query `tool`, body `{args}`). Args are checked against the tool's JSON Schema " +
    "first (400 VALIDATION_FAILED); the result is MCP's CallToolResult.",
  input: v.object({
    tool: toolName,
    args: v.optional(v.record(v.string(), v.unknown(), "args must be an object"), {}),
  }),
  auth: { kinds: ["session", "gateway_key"] },
  output: ToolResultView,
  errors: { NOT_FOUND: {}, VALIDATION_FAILED: {}, TIMEOUT: {}, UNAVAILABLE: {}, BAD_GATEWAY: {} },
  http: [{ surface: "gateway", method: "POST", path: "/mcp/tools/execute" }],
  async handler(params, ctx) {
    return executeTool(ctx.deps, params.tool, params.args, { principal: principalOf(ctx), signal: ctx.signal });
  },
});

export const bridgeMcpConnect = toolsDomain.method({
  name: "bridge.mcp.connect",
  summary:
    "Admits one request to the MCP endpoint (docs/interface.md 4.5): a session, Gateway key or the service credential, and the bridge rate limit.",
  input: v.object({ server: upstreamServer }),
  auth: MCP_AUTH,
  policies: { rateLimit: "bridge" },
  internal: true,
  errors: { NOT_FOUND: {} },
  http: [],
  // A server's own endpoint: another tenant's server is the same 404 as one nobody registered.
  handler: async (params, ctx) => {
    if (ctx.principal.kind === "oauth") return admitAccessToken(ctx.deps, ctx.principal, params.server);
    if (params.server !== undefined) await requireVisibleServer(ctx.deps, ctx.principal, params.server);
  },
});

export const bridgeMcpToolsList = toolsDomain.method({
  name: "bridge.mcp.tools.list",
  summary: "MCP `tools/list`: the catalog as the caller's tenant sees it, with JSON Schemas.",
  input: v.object({ server: upstreamServer }),
  auth: MCP_AUTH,
  internal: true,
  http: [],
  async handler(params, ctx) {
    const tools = await visibleTools(ctx.deps, ctx.principal);
    if (params.server === undefined) return tools;
    const prefix = params.server + NAMESPACE_SEPARATOR;
    return tools
      .filter((tool) => tool.source.kind === "mcp" && tool.source.server === params.server)
      .map((tool) => ({ ...tool, name: tool.name.slice(prefix.length) }));
  },
});

export const bridgeMcpToolsCall = toolsDomain.method({
  name: "bridge.mcp.tools.call",
  summary: "MCP `tools/call`: runs a catalog tool for the caller after checking its arguments against the tool's schema.",
  input: v.object({
    server: upstreamServer,
    name: v.pipe(v.string("name must be a string"), v.minLength(1, "name is required"), v.maxLength(256)),
    arguments: v.optional(v.record(v.string(), v.unknown(), "arguments must be an object"), {}),
  }),
  // docs/mcp.md "Scopes": calling a tool takes mcp:call besides mcp:read.
  auth: { kinds: MCP_AUTH.kinds, scopes: ["mcp:read", "mcp:call"] },
  internal: true,
  errors: { NOT_FOUND: {}, TIMEOUT: {}, UNAVAILABLE: {}, BAD_GATEWAY: {} },
  http: [],
  async handler(params, ctx) {
    const options = {
      principal: ctx.principal,
      signal: ctx.signal,
      ...(ctx.onProgress ? { onProgress: ctx.onProgress } : {}),
      ...(ctx.relay ? { relay: ctx.relay } : {}),
    };
    if (params.server === undefined) return executeTool(ctx.deps, params.name, params.arguments, options);
    // A server's own endpoint: the catalog's call path (schema check, timeout) under the namespaced name.
    try {
      return await executeTool(ctx.deps, params.server + NAMESPACE_SEPARATOR + params.name, params.arguments, options);
    } catch (error) {
      if (error instanceof ServiceError && error.code === "NOT_FOUND") throw new ServiceError("NOT_FOUND", `Unknown tool: ${params.name}`);
      throw error;
    }
  },
});

export const bridgeMcpCapabilities = toolsDomain.method({
  name: "bridge.mcp.capabilities",
  summary: "What the MCP endpoint declares at initialize besides tools: resources and prompts when a server the caller sees offers them.",
  input: v.object({ server: upstreamServer }),
  errors: { NOT_FOUND: {} },
  ...mcpInternal,
  handler: (params, ctx) => federatedCapabilities(ctx.deps, { principal: ctx.principal, server: params.server }),
});

export const bridgeMcpResourcesList = toolsDomain.method({
  name: "bridge.mcp.resources.list",
  summary: "MCP `resources/list`: the resources of the upstream servers the caller sees, URIs namespaced `<server>+<uri>`.",
  input: v.object({ server: upstreamServer }),
  errors: { NOT_FOUND: {}, TIMEOUT: {}, UNAVAILABLE: {}, BAD_GATEWAY: {} },
  ...mcpInternal,
  handler: (params, ctx) => listResources(ctx.deps, federation(ctx, params.server)),
});

export const bridgeMcpResourcesTemplates = toolsDomain.method({
  name: "bridge.mcp.resources.templates",
  summary: "MCP `resources/templates/list`: the resource templates of the upstream servers the caller sees, namespaced like resources.",
  input: v.object({ server: upstreamServer }),
  errors: { NOT_FOUND: {}, TIMEOUT: {}, UNAVAILABLE: {}, BAD_GATEWAY: {} },
  ...mcpInternal,
  handler: (params, ctx) => listResourceTemplates(ctx.deps, federation(ctx, params.server)),
});

export const bridgeMcpResourcesRead = toolsDomain.method({
  name: "bridge.mcp.resources.read",
  summary: "MCP `resources/read`: reads a namespaced resource URI from its server, if the caller sees that server.",
  input: v.object({ server: upstreamServer, uri: ResourceUri }),
  errors: { NOT_FOUND: {}, TIMEOUT: {}, UNAVAILABLE: {}, BAD_GATEWAY: {} },
  ...mcpInternal,
  handler: (params, ctx) => readResource(ctx.deps, federation(ctx, params.server), params.uri),
});

/** MCP `resources/subscribe` and `resources/unsubscribe`: one method each. */
function resourceSubscription<const V extends "subscribe" | "unsubscribe">(verb: V) {
  return toolsDomain.method({
    name: `bridge.mcp.resources.${verb}`,
    summary: `MCP \`resources/${verb}\`: relayed to the server of a namespaced URI, if the caller sees that server, for one MCP session.`,
    input: v.object({
      server: upstreamServer,
      uri: ResourceUri,
      // An MCP session id: sealed claims, at most 8192 characters (bridge/mcp/endpoint.ts).
      subscriber: v.pipe(v.string("subscriber must be a string"), v.minLength(1), v.maxLength(8192)),
    }),
    errors: { NOT_FOUND: {}, TIMEOUT: {}, UNAVAILABLE: {}, BAD_GATEWAY: {} },
    ...mcpInternal,
    handler: (params, ctx) => subscribe(ctx.deps, federation(ctx, params.server), params.uri, params.subscriber, verb === "subscribe"),
  });
}

export const bridgeMcpResourcesSubscribe = resourceSubscription("subscribe");
export const bridgeMcpResourcesUnsubscribe = resourceSubscription("unsubscribe");

export const bridgeMcpPromptsList = toolsDomain.method({
  name: "bridge.mcp.prompts.list",
  summary: "MCP `prompts/list`: the prompts of the upstream servers the caller sees, as `<server>__<prompt>`.",
  input: v.object({ server: upstreamServer }),
  errors: { NOT_FOUND: {}, TIMEOUT: {}, UNAVAILABLE: {}, BAD_GATEWAY: {} },
  ...mcpInternal,
  handler: (params, ctx) => listPrompts(ctx.deps, federation(ctx, params.server)),
});

export const bridgeMcpPromptsGet = toolsDomain.method({
  name: "bridge.mcp.prompts.get",
  summary: "MCP `prompts/get`: a namespaced prompt from its server, if the caller sees that server.",
  input: v.object({
    server: upstreamServer,
    name: v.pipe(v.string("name must be a string"), v.minLength(1, "name is required"), v.maxLength(256)),
    arguments: v.optional(v.record(v.string(), v.string("prompt arguments are strings")), {}),
  }),
  errors: { NOT_FOUND: {}, TIMEOUT: {}, UNAVAILABLE: {}, BAD_GATEWAY: {} },
  ...mcpInternal,
  handler: (params, ctx) => getPrompt(ctx.deps, federation(ctx, params.server), params.name, params.arguments),
});

export const bridgeMcpCompletionComplete = toolsDomain.method({
  name: "bridge.mcp.completion.complete",
  summary:
    "MCP `completion/complete`: completions of a namespaced prompt argument or resource template variable, from its server, if the caller sees that server.",
  input: v.object({
    server: upstreamServer,
    ref: v.variant("type", [
      v.object({
        type: v.literal("ref/prompt"),
        name: v.pipe(v.string("name must be a string"), v.minLength(1, "name is required"), v.maxLength(256)),
      }),
      v.object({ type: v.literal("ref/resource"), uri: ResourceUri }),
    ]),
    argument: v.object({ name: v.pipe(v.string(), v.maxLength(256)), value: v.pipe(v.string(), v.maxLength(4096)) }),
    context: v.optional(v.object({ arguments: v.optional(v.record(v.string(), v.string("completion context arguments are strings"))) })),
  }),
  errors: { NOT_FOUND: {}, TIMEOUT: {}, UNAVAILABLE: {}, BAD_GATEWAY: {} },
  ...mcpInternal,
  handler: (params, ctx) => complete(ctx.deps, federation(ctx, params.server), params),
});

/** The tool catalog over REST (docs/interface.md 4.4 "Tool catalog and routing", 4.5 `/v1/mcp/tools`). */
export const toolMethods = [
  mcpToolsList,
  mcpToolsGet,
  mcpToolsExecute,
  bridgeMcpConnect,
  bridgeMcpToolsList,
  bridgeMcpToolsCall,
  bridgeMcpCapabilities,
  bridgeMcpResourcesList,
  bridgeMcpResourcesTemplates,
  bridgeMcpResourcesRead,
  bridgeMcpResourcesSubscribe,
  bridgeMcpResourcesUnsubscribe,
  bridgeMcpPromptsList,
  bridgeMcpPromptsGet,
  bridgeMcpCompletionComplete,
];
