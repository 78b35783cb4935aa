import { ServiceError } from "../errors.js";
import type { AgentRecord } from "../../storage/repos/agents.js";
import { statusChangedAt, statusOf } from "./state.js";
import { roleAllows, roleIn, type Role } from "../tenants/access.js";
import type { AgentsDeps } from "./deps.js";

/**
 * An agent of a tenant the caller is a member of, with at least `need` (rpc/tenants/access.ts):
 * a non-member gets the same 404 as for a missing agent, a member whose role is too weak 403.
 */
export async function requireAgent(deps: AgentsDeps, userId: string, agentId: string, need: Role = "viewer"): Promise<AgentRecord> {
  const agent = await deps.agents.find(agentId, userId);
  const tenant = agent ? await deps.tenants.getTenant(agent.tenantId) : null;
  const role = tenant ? await roleIn(deps, userId, tenant) : null;
  if (!agent || !tenant || !role) throw new ServiceError("NOT_FOUND", `Agent not found: ${agentId}`);
  if (!roleAllows(role, need)) {
    throw new ServiceError("FORBIDDEN", `Your role in tenant ${tenant.slug} is ${role}; this needs ${need} or above`, {
      details: { tenantId: tenant.id, role, required: need },
    });
  }
  return agent;
}

/** The agent as every response shows it: docs/interface.md 2.6 fields, plus its tenant. */
export async function agentView(deps: AgentsDeps, agent: AgentRecord) {
  const [status, changedAt] = await Promise.all([statusOf(deps, agent.id), statusChangedAt(deps, agent.id)]);
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
