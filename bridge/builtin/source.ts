import { ServiceError } from "../../rpc/errors.js";
import type { CallOptions, ToolDef, ToolResult, ToolSource } from "../../rpc/tools/types.js";
import type { BuiltinTool } from "./internal/tool.js";
import { calculator } from "./calculator.js";
import { currentTime } from "./current-time.js";
import { httpFetch, type HttpFetchOptions } from "./http-fetch.js";
import { textStats } from "./text-stats.js";

export const BUILTIN_SOURCE_ID = "builtin";

export type BuiltinOptions = HttpFetchOptions;

/** The tools that ship with the service and run in-process. */
export class BuiltinSource implements ToolSource {
  readonly id = BUILTIN_SOURCE_ID;
  readonly #tools: Map<string, BuiltinTool>;
  readonly #defs: ToolDef[];

  constructor(options: BuiltinOptions = {}) {
    const tools = [httpFetch(options), currentTime, calculator, textStats];
    this.#tools = new Map(tools.map((tool) => [tool.name, tool]));
    // Built once: the same schema objects every time keeps the compiled validators cached.
    this.#defs = tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema,
      category: tool.category,
      source: { kind: "builtin", id: BUILTIN_SOURCE_ID },
    }));
  }

  async list(): Promise<ToolDef[]> {
    return this.#defs;
  }

  async call(tool: ToolDef, args: Record<string, unknown>, options: CallOptions): Promise<ToolResult> {
    const builtin = this.#tools.get(tool.name);
    if (!builtin) throw new ServiceError("NOT_FOUND", `Unknown tool: ${tool.name}`);
    return builtin.run(args, options);
  }
}
