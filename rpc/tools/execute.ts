import type { Principal } from "../auth.js";
import { ServiceError } from "../errors.js";
import type { CallOptions, ToolDef, ToolResult, ToolScope } from "./types.js";
import { assertArgs } from "./validate-args.js";
import { scopeOfPrincipal } from "./visible-tools.js";
import type { ToolsDeps } from "./deps.js";

export interface ExecuteOptions {
  principal: Principal;
  signal?: AbortSignal;
  onProgress?: CallOptions["onProgress"];
  relay?: CallOptions["relay"];
}

/** The catalog entry of `name` in the caller's scope, or NOT_FOUND (404 over REST) — another tenant's tool included. */
export async function requireTool(deps: ToolsDeps, name: string, scope: ToolScope): Promise<ToolDef> {
  const tool = await deps.catalog.get(name, scope);
  if (!tool) throw new ServiceError("NOT_FOUND", `Unknown tool: ${name}`);
  return tool;
}

/**
 * Runs a catalog tool for a caller, the one path REST and MCP share: look the tool up,
 * check the args against its JSON Schema before anything runs (docs/interface.md 4.4), then call its
 * source within GATEWAY_TIMEOUT_SECONDS (docs/interface.md 8).
 */
export async function executeTool(deps: ToolsDeps, name: string, args: unknown, options: ExecuteOptions): Promise<ToolResult> {
  const scope = await scopeOfPrincipal(deps, options.principal);
  const tool = await requireTool(deps, name, scope);
  assertArgs(name, tool.inputSchema, args ?? {});
  // Upstream and VM tools resolve only within the caller's tenant (docs/architecture.md "Ownership").
  return deps.catalog.call(name, (args ?? {}) as Record<string, unknown>, {
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
