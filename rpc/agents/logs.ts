import type { Services } from "../services.js";
import type { AgentLogEntry, AgentLogLevel } from "../../storage/repos/agents.js";
import { agentTimestamp } from "./time.js";

/**
 * Appends one persisted log line. The sequence is atomic in storage, so lines written
 * by concurrent invocations (or instances) never share a slot; past AGENT_LOG_MAX_ENTRIES
 * the oldest line is dropped.
 */
export async function appendAgentLog(
  services: Services,
  agentId: string,
  entry: { level?: AgentLogLevel; event: string; message: string; runId?: string; data?: Record<string, unknown> },
): Promise<AgentLogEntry> {
  const seq = await services.agentState.nextLogSeq(agentId);
  const line: AgentLogEntry = { seq, time: agentTimestamp(), level: entry.level ?? "info", event: entry.event, message: entry.message };
  if (entry.runId) line.runId = entry.runId;
  if (entry.data) line.data = entry.data;
  await services.agents.appendLog(agentId, line);
  const max = services.config.AGENT_LOG_MAX_ENTRIES;
  if (seq > max) await services.agents.removeLog(agentId, seq - max);
  return line;
}

/** The last `lines` entries, newest last. */
export async function readAgentLogs(services: Services, agentId: string, lines: number): Promise<AgentLogEntry[]> {
  const all = await services.agents.logs(agentId);
  return lines >= all.length ? all : all.slice(all.length - lines);
}

export async function dropAgentLogs(services: Services, agentId: string): Promise<void> {
  await services.agents.clearLogs(agentId);
  await services.agentState.dropLogSeq(agentId);
}
