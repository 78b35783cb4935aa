import * as v from "valibot";
import { defineMethod } from "../define.js";
import { principalOf } from "../auth.js";
import { ServiceError } from "../errors.js";
import { executeTool, toolView } from "./execute.js";
import { visibleTool, visibleTools } from "./visible-tools.js";
import { ToolResultView, ToolView } from "../views.js";

const category = v.optional(v.pipe(v.string("category must be a string"), v.minLength(1), v.maxLength(64)));
const toolName = v.pipe(v.string("tool must be a string"), v.minLength(1, "tool is required"), v.maxLength(256));

/** The tool catalog over REST (spec 4.4 "Tool catalog and routing", 4.5 `/v1/mcp/tools`). */
export const toolMethods = [
  defineMethod({
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
      const tools = await visibleTools(ctx.services, principalOf(ctx), { category: params.category });
      return { tools: tools.map(toolView), count: tools.length };
    },
  }),

  defineMethod({
    name: "mcp.tools.get",
    summary: "One tool of the catalog with its JSON Schema; 404 for an unknown name.",
    input: v.object({ name: toolName }),
    auth: { kinds: ["session", "gateway_key"] },
    output: ToolView,
    errors: ["NOT_FOUND"],
    http: [{ surface: "gateway", method: "GET", path: "/mcp/tools/:name" }],
    async handler(params, ctx) {
      const tool = await visibleTool(ctx.services, principalOf(ctx), params.name);
      if (!tool) throw new ServiceError("NOT_FOUND", `Unknown tool: ${params.name}`);
      return toolView(tool);
    },
  }),

  defineMethod({
    name: "mcp.tools.execute",
    summary:
      "Run a catalog tool (spec 2.7: query `tool`, body `{args}`). Args are checked against the tool's JSON Schema first (400 VALIDATION_FAILED); the result is MCP's CallToolResult.",
    input: v.object({
      tool: toolName,
      args: v.optional(v.record(v.string(), v.unknown(), "args must be an object"), {}),
    }),
    auth: { kinds: ["session", "gateway_key"] },
    output: ToolResultView,
    errors: ["NOT_FOUND", "VALIDATION_FAILED", "TIMEOUT", "UNAVAILABLE", "BAD_GATEWAY"],
    http: [{ surface: "gateway", method: "POST", path: "/mcp/tools/execute" }],
    async handler(params, ctx) {
      return executeTool(ctx.services, params.tool, params.args, { principal: principalOf(ctx), signal: ctx.signal });
    },
  }),
  defineMethod({
    name: "bridge.mcp.connect",
    summary: "Admits one request to the MCP endpoint (spec 4.5): a session, Gateway key or the service credential, and the bridge rate limit.",
    input: v.object({}),
    auth: { kinds: ["session", "gateway_key", "service"] },
    policies: { rateLimit: "bridge" },
    internal: true,
    http: [],
    handler: () => undefined,
  }),
  defineMethod({
    name: "bridge.mcp.tools.list",
    summary: "MCP `tools/list`: the catalog as the caller's tenant sees it, with JSON Schemas.",
    input: v.object({}),
    auth: { kinds: ["session", "gateway_key", "service"] },
    internal: true,
    http: [],
    handler: (_params, ctx) => visibleTools(ctx.services, ctx.principal),
  }),
  defineMethod({
    name: "bridge.mcp.tools.call",
    summary: "MCP `tools/call`: runs a catalog tool for the caller after checking its arguments against the tool's schema.",
    input: v.object({
      name: v.pipe(v.string("name must be a string"), v.minLength(1, "name is required"), v.maxLength(256)),
      arguments: v.optional(v.record(v.string(), v.unknown(), "arguments must be an object"), {}),
    }),
    auth: { kinds: ["session", "gateway_key", "service"] },
    internal: true,
    http: [],
    handler: (params, ctx) => executeTool(ctx.services, params.name, params.arguments, { principal: ctx.principal, signal: ctx.signal }),
  }),
];
