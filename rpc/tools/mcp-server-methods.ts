import * as v from "valibot";
import { defineMethod } from "../define.js";
import { principalOf } from "../auth.js";

/** Upstream MCP servers whose tools join the catalog (spec 4.4 `GET, POST /mcp/servers`). */
export const mcpServerMethods = [
  defineMethod({
    name: "mcp.servers.list",
    summary: "Registered upstream MCP servers with their health (connecting, healthy, unhealthy), last error and tool count.",
    input: v.object({}),
    auth: { kinds: ["session", "gateway_key"] },
    http: [{ surface: "gateway", method: "GET", path: "/mcp/servers" }],
    async handler(_params, ctx) {
      const servers = await ctx.services.upstream.list();
      return { servers, count: servers.length };
    },
  }),

  defineMethod({
    name: "mcp.servers.register",
    summary:
      "Register an upstream MCP server (Streamable HTTP). Its tools appear as `<name>__<tool>`. Answers 201 after the first connection attempt, with the health it reached: a server that is down is kept and retried.",
    input: v.object({
      // No underscores: `<server>__<tool>` must split unambiguously.
      name: v.pipe(v.string("name must be a string"), v.regex(/^[A-Za-z0-9][A-Za-z0-9-]{0,47}$/, "name: 1-48 letters, digits or '-'")),
      url: v.pipe(v.string("url must be a string"), v.url("url must be an absolute URL"), v.regex(/^https?:\/\//i, "url must be http or https"), v.maxLength(2048)),
      headers: v.optional(
        v.pipe(
          v.record(v.pipe(v.string(), v.regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, "invalid header name")), v.pipe(v.string("header values must be strings"), v.maxLength(8192))),
          v.check((headers) => Object.keys(headers).length <= 32, "at most 32 headers"),
        ),
        {},
      ),
      category: v.optional(v.pipe(v.string(), v.regex(/^[a-z0-9][a-z0-9_-]{0,31}$/, "category: lowercase letters, digits, _ or -")), "mcp"),
    }),
    auth: { kinds: ["session", "gateway_key"] },
    http: [{ surface: "gateway", method: "POST", path: "/mcp/servers", status: 201 }],
    async handler(params, ctx) {
      return ctx.services.upstream.register({ ...params, createdBy: principalOf(ctx).userId });
    },
  }),

  defineMethod({
    name: "mcp.servers.delete",
    summary: "Unregister an upstream MCP server; its tools leave the catalog on every instance.",
    input: v.object({ name: v.pipe(v.string(), v.minLength(1), v.maxLength(48)) }),
    auth: { kinds: ["session", "gateway_key"] },
    http: [{ surface: "gateway", method: "DELETE", path: "/mcp/servers/:name" }],
    async handler(params, ctx) {
      await ctx.services.upstream.remove(params.name);
      return { success: true, name: params.name };
    },
  }),
];
