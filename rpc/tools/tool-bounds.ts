/**
 * Bounds on what a tool source may announce (docs/security.md "Input bounds"). Schemas from
 * VMs and upstream MCP servers are served to every caller of the catalog, serialized into
 * every listing and compiled into validators: one unbounded schema (10,000 levels deep) used
 * to make `GET /mcp/tools` answer 500 and MCP `tools/list` hang for everyone who could see it.
 */
export const TOOL_BOUNDS = {
  /** Nesting of objects and arrays in one inputSchema, the schema object itself being level 1. */
  maxSchemaDepth: 32,
  /** Size of one inputSchema serialized as JSON (UTF-8 bytes). */
  maxSchemaBytes: 64 * 1024,
  /** Tools one source (a VM, an upstream MCP server) may announce. */
  maxToolsPerSource: 1000,
} as const;

/** Levels of nested objects and arrays, counted without recursion; stops counting past `limit`. */
function depthExceeds(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (typeof node !== "object" || node === null) continue;
    if (depth > limit) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}

/** Why an inputSchema breaks the bounds, or undefined when it fits. */
export function schemaProblem(schema: unknown): string | undefined {
  // Depth first: serializing a schema thousands of levels deep overflows the stack.
  if (depthExceeds(schema, TOOL_BOUNDS.maxSchemaDepth)) return `inputSchema is deeper than ${TOOL_BOUNDS.maxSchemaDepth} levels`;
  const bytes = Buffer.byteLength(JSON.stringify(schema) ?? "");
  if (bytes > TOOL_BOUNDS.maxSchemaBytes) return `inputSchema is larger than 64 KiB (${bytes} bytes)`;
  return undefined;
}

/** Why a source's announcement breaks the bounds (count first, then each schema), or undefined. */
export function announcementProblem(tools: readonly { name: string; inputSchema?: unknown }[]): string | undefined {
  if (tools.length > TOOL_BOUNDS.maxToolsPerSource)
    return `announces ${tools.length} tools; at most ${TOOL_BOUNDS.maxToolsPerSource} tools per source`;
  for (const tool of tools) {
    const problem = tool.inputSchema === undefined ? undefined : schemaProblem(tool.inputSchema);
    if (problem) return `tool ${tool.name}: ${problem}`;
  }
  return undefined;
}

const checked = new WeakMap<object, boolean>();

/**
 * True when a listed schema is within bounds, remembered per schema object so a listing
 * costs one map lookup per tool. The catalog's last line of defence: sources check first.
 */
export function withinBounds(schema: Record<string, unknown>): boolean {
  let ok = checked.get(schema);
  if (ok === undefined) {
    ok = schemaProblem(schema) === undefined;
    checked.set(schema, ok);
  }
  return ok;
}
