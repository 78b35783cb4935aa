import type { AgentLogEntry, AgentLogLevel } from "../../storage/repos/agents.js";
import { agentTimestamp } from "../time.js";
import type { AgentsDeps } from "./deps.js";

/**
 * Appends one persisted log line. The sequence is atomic in storage, so lines written
 * by concurrent invocations (or instances) never share a slot; past AGENT_LOG_MAX_ENTRIES
 * the oldest line is dropped.
 */
export async function appendAgentLog(
  deps: AgentsDeps,
  agentId: string,
  entry: { level?: AgentLogLevel; event: string; message: string; runId?: string; data?: Record<string, unknown> },
): Promise<AgentLogEntry> {
  const seq = await deps.agentState.nextLogSeq(agentId);
  const line: AgentLogEntry = { seq, time: agentTimestamp(), level: entry.level ?? "info", event: entry.event, message: entry.message };
  if (entry.runId) line.runId = entry.runId;
  if (entry.data) line.data = entry.data;
  await deps.agents.appendLog(agentId, line);
  const max = deps.config.AGENT_LOG_MAX_ENTRIES;
  if (seq > max) await deps.agents.removeLog(agentId, seq - max);
  return line;
}

/** The last `lines` entries, newest last. */
export async function readAgentLogs(deps: AgentsDeps, agentId: string, lines: number): Promise<AgentLogEntry[]> {
  const all = await deps.agents.logs(agentId);
  return lines >= all.length ? all : all.slice(all.length - lines);
}

export async function dropAgentLogs(deps: AgentsDeps, agentId: string): Promise<void> {
  await deps.agents.clearLogs(agentId);
  await deps.agentState.dropLogSeq(agentId);
}
