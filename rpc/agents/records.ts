import { ServiceError } from "../errors.js";
import type { Services } from "../services.js";
import type { AgentRecord } from "../../storage/repos/agents.js";
import { statusOf } from "./state.js";

/** The caller's agent; another user's id and a missing one are the same 404. */
export async function requireAgent(services: Services, userId: string, agentId: string): Promise<AgentRecord> {
  const agent = await services.agents.get(userId, agentId);
  if (!agent) throw new ServiceError("NOT_FOUND", `Agent not found: ${agentId}`);
  return agent;
}

/** The agent as every response shows it: spec 2.6 fields, plus its tenant. */
export async function agentView(services: Services, agent: AgentRecord) {
  return {
    id: agent.id,
    name: agent.name,
    model: agent.model,
    tools: agent.tools,
    status: await statusOf(services, agent.id),
    description: agent.description,
    config: agent.config,
    tenantId: agent.tenantId,
    createdAt: agent.createdAt,
    updatedAt: agent.updatedAt,
  };
}
