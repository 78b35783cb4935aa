import * as v from "valibot";
import { Relayed } from "../views.js";
import type { HttpVerb } from "../define.js";
import type { AuthSpec } from "../auth.js";
import { principalOf } from "../auth.js";
import { queryInt } from "../validate.js";
import { orchestratorOf } from "./orchestrator/client.js";
import { readSseData } from "../sse-parse.js";
import { agentsDomain, type AgentsContext } from "./deps.js";

/**
 * Agents in orchestrator-proxy mode (docs/interface.md 4.4): served when ORCH_BASE_URL is set, instead of
 * the local agents. Agents are addressed by name; every call is forwarded to the same path
 * under ORCH_BASE_URL with the caller's identity (docs/orchestrator.md), and the orchestrator's
 * answer comes back as is — a list may be a bare array (docs/interface.md 2.6).
 */

const AUTH = { kinds: ["session", "gateway_key"] } as const satisfies AuthSpec;

/**
 * What the orchestrator's answers become (rpc/agents/orchestrator/errors.ts): the caller's
 * mistakes keep their meaning, the orchestrator's own failures are 502, no answer in time 504.
 */
const ORCHESTRATOR_ERRORS = {
  BAD_REQUEST: {},
  FORBIDDEN: {},
  NOT_FOUND: {},
  CONFLICT: {},
  RATE_LIMITED: {},
  BAD_GATEWAY: {},
  TIMEOUT: {},
} as const;

const AGENT_NAME = v.pipe(
  v.string("name must be a string"),
  v.regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, "name: letters, digits, _ . - (1-128, starting with a letter or digit)"),
);

const agentPath = (name: string, action?: string) => `/agents/${encodeURIComponent(name)}${action ? `/${action}` : ""}`;

/** Everything but the path parameter, for the upstream body or query. */
function rest(params: Record<string, unknown>): Record<string, unknown> {
  const { name: _name, ...others } = params;
  return others;
}

/** Scalars only: a query string cannot carry objects. */
function queryOf(params: Record<string, unknown>): Record<string, string | number | boolean> {
  const query: Record<string, string | number | boolean> = {};
  for (const [key, value] of Object.entries(params)) {
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") query[key] = value;
  }
  return query;
}

function call(
  ctx: AgentsContext,
  method: "GET" | "POST",
  path: string,
  extra: { query?: Record<string, string | number | boolean>; body?: Record<string, unknown> },
) {
  return orchestratorOf(ctx.deps).json({
    method,
    path,
    ...extra,
    caller: { principal: principalOf(ctx), requestId: ctx.requestId, traceparent: ctx.traceparent },
    signal: ctx.signal,
  });
}

/** An empty answer to an action still tells the caller what happened. */
const acknowledged = (result: unknown, name: string, action: string) => result ?? { success: true, name, action };

/** One forwarded agent operation `<verb> /agents/:name/<action>`. */
function agentAction<const A extends string>(
  action: A,
  verb: HttpVerb & ("GET" | "POST"),
  summary: string,
  extraInput: v.ObjectEntries = {},
) {
  return agentsDomain.method({
    name: `agents.${action}`,
    summary,
    input: v.looseObject({ name: AGENT_NAME, ...extraInput }),
    auth: AUTH,
    output: Relayed,
    errors: ORCHESTRATOR_ERRORS,
    http: [{ surface: "gateway", method: verb, path: `/agents/:name/${action}` }],
    async handler(params, ctx) {
      const others = rest(params);
      const result =
        verb === "GET"
          ? await call(ctx, "GET", agentPath(params.name, action), { query: queryOf(others) })
          : await call(ctx, "POST", agentPath(params.name, action), { body: others });
      return verb === "POST" ? acknowledged(result, params.name, action) : result;
    },
  });
}

export const orchestratorAgentMethods = [
  agentsDomain.method({
    name: "agents.list",
    summary: "Agents known to the orchestrator (orchestrator-proxy mode); query parameters are passed on.",
    input: v.looseObject({}),
    auth: AUTH,
    output: Relayed,
    errors: ORCHESTRATOR_ERRORS,
    http: [{ surface: "gateway", method: "GET", path: "/agents" }],
    handler: (params, ctx) => call(ctx, "GET", "/agents", { query: queryOf(params) }),
  }),

  agentsDomain.method({
    name: "agents.create",
    summary: "Create (and, depending on the orchestrator, spawn) an agent by name; the body is passed on.",
    input: v.looseObject({
      name: AGENT_NAME,
      model: v.optional(v.string("model must be a string")),
      tools: v.optional(v.array(v.string("tools must be strings"), "tools must be an array of strings")),
      description: v.optional(v.string("description must be a string")),
      config: v.optional(v.record(v.string(), v.unknown(), "config must be an object")),
    }),
    auth: AUTH,
    output: Relayed,
    errors: ORCHESTRATOR_ERRORS,
    http: [{ surface: "gateway", method: "POST", path: "/agents", status: 201 }],
    handler: (params, ctx) => call(ctx, "POST", "/agents", { body: params }),
  }),

  agentsDomain.method({
    name: "agents.get",
    summary: "One agent by name, as the orchestrator describes it.",
    input: v.object({ name: AGENT_NAME }),
    auth: AUTH,
    output: Relayed,
    errors: ORCHESTRATOR_ERRORS,
    http: [{ surface: "gateway", method: "GET", path: "/agents/:name" }],
    handler: (params, ctx) => call(ctx, "GET", agentPath(params.name), {}),
  }),

  agentsDomain.method({
    name: "agents.logs",
    summary: "The last `tail` log lines of an agent (orchestrator-proxy mode).",
    input: v.object({ name: AGENT_NAME, tail: v.optional(queryInt(1, 10_000)) }),
    auth: AUTH,
    output: Relayed,
    errors: ORCHESTRATOR_ERRORS,
    http: [{ surface: "gateway", method: "GET", path: "/agents/:name/logs" }],
    handler: (params, ctx) =>
      call(ctx, "GET", agentPath(params.name, "logs"), { query: params.tail === undefined ? {} : { tail: params.tail } }),
  }),

  agentAction("pause", "POST", "Pause a running agent."),
  agentAction("resume", "POST", "Resume a paused agent."),
  agentAction("cancel", "POST", "Cancel an agent's current work."),
  agentAction("diff", "GET", "The changes an agent made in its workspace, as the orchestrator reports them."),
  agentAction("files", "GET", "The files of an agent's workspace; query parameters (e.g. path) are passed on."),
  agentAction("commit", "POST", "Commit an agent's changes; the body (e.g. message) is passed on.", {
    message: v.optional(v.string("message must be a string")),
  }),
  agentAction("pr", "POST", "Open a pull request with an agent's changes; the body (e.g. title, body, base) is passed on.", {
    title: v.optional(v.string("title must be a string")),
  }),

  agentsDomain.method({
    name: "agents.stream",
    summary: "The agent's live event stream, relayed from the orchestrator event by event (SSE).",
    input: v.looseObject({ name: AGENT_NAME }),
    auth: AUTH,
    output: Relayed,
    errors: ORCHESTRATOR_ERRORS,
    http: [{ surface: "gateway", method: "GET", path: "/agents/:name/stream" }],
    stream: {},
    async handler(params, ctx) {
      // Opened before the handler returns, so an orchestrator error is an HTTP error, not a frame.
      const body = await orchestratorOf(ctx.deps).stream({
        method: "GET",
        path: agentPath(params.name, "stream"),
        query: queryOf(rest(params)),
        caller: { principal: principalOf(ctx), requestId: ctx.requestId, traceparent: ctx.traceparent },
        signal: ctx.signal,
      });
      // Relayed event by event, unchanged, including a `[DONE]` marker.
      return readSseData(body);
    },
  }),
];
