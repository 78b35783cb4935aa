import type { Principal } from "../auth.js";
import { ServiceError } from "../errors.js";
import type { CallOptions, ResolvedTool, ToolDef, ToolResult, ToolScope } from "./types.js";
import { assertArgs } from "./validate-args.js";
import { scopeOfPrincipal } from "./visible-tools.js";
import type { ToolsDeps } from "./deps.js";

export interface ExecuteOptions {
  principal: Principal;
  signal?: AbortSignal;
  onProgress?: CallOptions["onProgress"];
  relay?: CallOptions["relay"];
}

/** `name` resolved in the caller's scope, or NOT_FOUND (404 over REST) — another tenant's tool included. */
async function resolveTool(deps: ToolsDeps, name: string, scope: ToolScope): Promise<ResolvedTool> {
  const resolved = await deps.catalog.resolve(name, scope);
  if (!resolved) throw new ServiceError("NOT_FOUND", `Unknown tool: ${name}`);
  return resolved;
}

/**
 * Runs a catalog tool for a caller, the one path REST and MCP share: resolve the name once
 * (entry and source), check the args against the entry's JSON Schema before anything runs
 * (docs/interface.md 4.4), then run that resolution within GATEWAY_TIMEOUT_SECONDS
 * (docs/interface.md 8) — the name is not looked up again.
 */
export async function executeTool(deps: ToolsDeps, name: string, args: unknown, options: ExecuteOptions): Promise<ToolResult> {
  const scope = await scopeOfPrincipal(deps, options.principal);
  const resolved = await resolveTool(deps, name, scope);
  assertArgs(name, resolved.tool.inputSchema, args ?? {});
  // Upstream and VM tools resolve only within the caller's tenant (docs/architecture.md "Ownership").
  return deps.catalog.run(resolved, (args ?? {}) as Record<string, unknown>, {
    timeoutMs: deps.config.GATEWAY_TIMEOUT_SECONDS * 1000,
    signal: options.signal,
    tenantId: "tenantId" in scope ? scope.tenantId : undefined,
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    ...(options.relay ? { relay: options.relay } : {}),
  });
}

/** The public shape of a catalog entry. */
export function toolView(tool: ToolDef) {
  return {
    name: tool.name,
    description: tool.description,
    category: tool.category,
    inputSchema: tool.inputSchema,
    source: tool.source.kind,
  };
}
