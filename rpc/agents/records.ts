import { ServiceError } from "../errors.js";
import type { Services } from "../services.js";
import type { AgentRecord } from "../../storage/repos/agents.js";
import { statusChangedAt, statusOf } from "./state.js";

/** The caller's agent; another user's id and a missing one are the same 404. */
export async function requireAgent(services: Services, userId: string, agentId: string): Promise<AgentRecord> {
  const agent = await services.agents.get(userId, agentId);
  if (!agent) throw new ServiceError("NOT_FOUND", `Agent not found: ${agentId}`);
  return agent;
}

/** The agent as every response shows it: spec 2.6 fields, plus its tenant. */
export async function agentView(services: Services, agent: AgentRecord) {
  const [status, changedAt] = await Promise.all([statusOf(services, agent.id), statusChangedAt(services, agent.id)]);
  return {
    id: agent.id,
    name: agent.name,
    model: agent.model,
    tools: agent.tools,
    status,
    description: agent.description,
    config: agent.config,
    tenantId: agent.tenantId,
    createdAt: agent.createdAt,
    // A status change (deploy, pause, resume, a run starting or ending) is an update too.
    updatedAt: changedAt && changedAt > agent.updatedAt ? changedAt : agent.updatedAt,
  };
}
