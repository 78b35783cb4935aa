import { pick, type Ports } from "../module.js";
import { agentsDomain, type AgentsDeps } from "./deps.js";
import { agentStreamMethods, localAgentMethods } from "./methods.js";
import { orchestratorAgentMethods } from "./orchestrator-methods.js";
import { accountAgentMethods } from "./account-methods.js";

const init = (ports: Ports): AgentsDeps => ({
  ...pick(ports, ["config", "log", "store", "sink", "onClose"]),
  ...pick(ports.repos, ["users", "tenants", "members", "agents", "agentState", "quotas"]),
  catalog: ports.use("bridge").catalog,
  models: ports.use("models"),
  money: ports.use("money"),
});

/** Agents by id, run here (docs/agents.md), also on the Account API's `/agent/*` for desktop and CLI clients. */
export const localAgentsModule = agentsDomain.module({
  methods: [...agentStreamMethods, ...localAgentMethods, ...accountAgentMethods],
  init,
});

/** Agents by name, proxied to the orchestrator (ORCH_BASE_URL, docs/orchestrator.md). */
export const orchestratorAgentsModule = agentsDomain.module({ methods: [...agentStreamMethods, ...orchestratorAgentMethods], init });
