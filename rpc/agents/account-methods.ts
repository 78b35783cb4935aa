import * as v from "valibot";
import type { AnyMethod, ErrorDecl, HttpBinding } from "../define.js";
import { agentsCancel, agentsCreate, agentsDelete, agentsGet, agentsInvoke, agentsList, agentsLogs } from "./methods.js";
import { requireAgent } from "./records.js";
import { agentsDomain } from "./deps.js";
import { toolView } from "../tools/execute.js";
import { scopeOfPrincipal } from "../tools/visible-tools.js";
import { ToolView } from "../views.js";

/**
 * The Account API's agent endpoints (docs/interface.md 4.1, 5: "for desktop and command-line clients",
 * scope `compute`; docs/agents.md "Account API: `/agent/*`"). The same operations as the
 * Gateway's agent methods — same handlers, same rules, same answers — reached with a personal
 * key holding `compute`; a key without it gets 403 `INSUFFICIENT_CAPABILITY` (docs/interface.md 7.1).
 */
const ACCOUNT_AUTH = { kinds: ["account_key"], scopes: ["compute"], scopeError: "INSUFFICIENT_CAPABILITY" } as const;

const AgentId = v.pipe(v.string("agent_id must be a string"), v.minLength(1, "agent_id is required"), v.maxLength(128));

/** A Gateway agent method as the Account API offers it: another name, the Account auth, one binding. */
type OnAccount<M extends AnyMethod, N extends string> = Omit<M, "name" | "auth" | "errors" | "http"> & {
  readonly name: N;
  readonly auth: typeof ACCOUNT_AUTH;
  readonly errors: NonNullable<M["errors"]> & { readonly INSUFFICIENT_CAPABILITY: ErrorDecl };
  readonly http: readonly HttpBinding[];
};

/** A Gateway agent method offered on the Account API under `name`, at one binding. */
function onAccount<M extends AnyMethod, const N extends string>(
  method: M,
  name: N,
  binding: Omit<HttpBinding, "surface">,
  summary?: string,
): OnAccount<M, N> {
  return {
    ...method,
    name,
    // Named `account.agent.*` before the one naming scheme (docs/versioning.md).
    formerNames: [name.replace("account.agents.", "account.agent.")],
    summary: summary ?? method.summary,
    auth: ACCOUNT_AUTH,
    errors: { ...(method.errors as NonNullable<M["errors"]>), INSUFFICIENT_CAPABILITY: {} },
    http: [{ ...binding, surface: "account" }],
  };
}

export const accountAgentMethods = [
  onAccount(
    agentsList,
    "account.agents.list",
    { method: "GET", path: "/agent/agents" },
    "Your agents (every tenant you are a member of, or `tenantId` only), oldest first, as a bare JSON array.",
  ),
  onAccount(agentsCreate, "account.agents.create", { method: "POST", path: "/agent/agents", status: 201 }),
  onAccount(agentsGet, "account.agents.get", { method: "GET", path: "/agent/agents/:agent_id" }),
  onAccount(agentsDelete, "account.agents.delete", { method: "DELETE", path: "/agent/agents/:agent_id" }),
  onAccount(agentsInvoke, "account.agents.invoke", { method: "POST", path: "/agent/agents/:agent_id/invoke" }),
  onAccount(agentsLogs, "account.agents.logs", { method: "GET", path: "/agent/agents/:agent_id/logs" }),
  onAccount(agentsCancel, "account.agents.cancel", { method: "POST", path: "/agent/runs/:run_id/cancel" }),

  agentsDomain.method({
    name: "account.agents.tools",
    formerNames: ["account.agent.tools"],
    summary:
      "The tools one of your agents may call: each of its tools as the catalog describes it now (name, description, " +
      "input schema), and `unavailable` naming those the catalog does not offer at the moment (a VM that is not " +
      "connected, a server removed).",
    input: v.object({ agent_id: AgentId }),
    auth: ACCOUNT_AUTH,
    output: v.object({ agentId: v.string(), tools: v.array(ToolView), unavailable: v.array(v.string()) }),
    errors: { NOT_FOUND: {}, INSUFFICIENT_CAPABILITY: {}, FORBIDDEN: {} },
    http: [{ surface: "account", method: "GET", path: "/agent/agents/:agent_id/tools" }],
    async handler(params, ctx) {
      const agent = await requireAgent(ctx.deps, ctx.principal.userId, params.agent_id);
      // The catalog as the agent's tenant sees it: what a run of this agent is offered.
      const catalog = await ctx.deps.catalog.list({ scope: { tenantId: agent.tenantId } });
      const tools = agent.tools.flatMap((name) => catalog.filter((tool) => tool.name === name));
      return {
        agentId: agent.id,
        tools: tools.map(toolView),
        unavailable: agent.tools.filter((name) => !tools.some((tool) => tool.name === name)),
      };
    },
  }),

  agentsDomain.method({
    name: "account.agents.catalog",
    formerNames: ["account.agent.catalog"],
    summary:
      "The tools you can give an agent (built-ins, your tenant's and shared MCP servers, your connected VMs), to pick `tools` when creating one.",
    input: v.object({}),
    auth: ACCOUNT_AUTH,
    output: v.object({ tools: v.array(ToolView), count: v.number() }),
    errors: { INSUFFICIENT_CAPABILITY: {} },
    http: [{ surface: "account", method: "GET", path: "/agent/tools" }],
    async handler(_params, ctx) {
      const tools = await ctx.deps.catalog.list({ scope: await scopeOfPrincipal(ctx.deps, ctx.principal) });
      return { tools: tools.map(toolView), count: tools.length };
    },
  }),
];
