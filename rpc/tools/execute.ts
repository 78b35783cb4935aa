import type { Principal } from "../auth.js";
import { ServiceError } from "../errors.js";
import type { Services } from "../services.js";
import type { ToolDef, ToolResult } from "./types.js";
import { assertArgs } from "./validate-args.js";

export interface ExecuteOptions {
  principal: Principal;
  signal?: AbortSignal;
}

/** The catalog entry of `name`, or NOT_FOUND (404 over REST). */
export async function requireTool(services: Services, name: string): Promise<ToolDef> {
  const tool = await services.catalog.get(name);
  if (!tool) throw new ServiceError("NOT_FOUND", `Unknown tool: ${name}`);
  return tool;
}

/**
 * Runs a catalog tool for a caller, the one path REST and MCP share: look the tool up,
 * check the args against its JSON Schema before anything runs (spec 4.4), then call its
 * source within GATEWAY_TIMEOUT_SECONDS (spec 8).
 */
export async function executeTool(services: Services, name: string, args: unknown, options: ExecuteOptions): Promise<ToolResult> {
  const tool = await requireTool(services, name);
  assertArgs(name, tool.inputSchema, args ?? {});
  // VM tools are scoped to the caller's tenant (bridge/vm/source.ts).
  const tenantId = (await services.users.get(options.principal.userId))?.tenantId;
  return services.catalog.call(name, (args ?? {}) as Record<string, unknown>, {
    timeoutMs: services.config.GATEWAY_TIMEOUT_SECONDS * 1000,
    signal: options.signal,
    tenantId,
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
