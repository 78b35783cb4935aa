import * as v from "valibot";
import type { ToolResult } from "../../rpc/tools/types.js";
import { schemaProblem, TOOL_BOUNDS } from "../../rpc/tools/tool-bounds.js";

/**
 * The VM-agent socket protocol (docs/vm-agents.md): JSON-RPC 2.0 in both directions.
 * VM → bridge: `tools/register` (tools, and optionally resources and prompts), `ping`.
 * Bridge → VM: `tools/call`, `resources/read`, `prompts/get`, `ping`, and the notification
 * `notifications/cancelled` `{requestId, reason}` when the bridge gives up on a request.
 */

/** Tool names are path-safe and MCP-name-safe (MCP allows `[A-Za-z0-9_.-]`). */
export const TOOL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Tools one VM may announce; keeps one misbehaving VM from flooding every catalog (docs/security.md "Input bounds"). */
export const MAX_TOOLS_PER_VM = TOOL_BOUNDS.maxToolsPerSource;

/** WebSocket close codes the bridge uses (4000–4999 are for applications, RFC 6455 7.4.2). */
export const CLOSE = {
  /** A newer connection with the same vmId took over. */
  replaced: 4001,
  /** No reply to heartbeats for two intervals. */
  heartbeat: 4002,
  /** The server is shutting down. */
  shutdown: 1001,
} as const;

const toolFields = v.object({
  name: v.pipe(
    v.string("name must be a string"),
    v.regex(TOOL_NAME, "name: letters, digits, _ . - (1-64, starting with a letter or digit)"),
  ),
  description: v.optional(v.pipe(v.string("description must be a string"), v.maxLength(4096)), ""),
  inputSchema: v.optional(
    v.pipe(
      v.record(v.string(), v.unknown(), "inputSchema must be a JSON Schema object"),
      v.check((schema) => schema.type === undefined || schema.type === "object", 'inputSchema.type must be "object"'),
    ),
    { type: "object" },
  ),
  category: v.optional(v.pipe(v.string("category must be a string"), v.regex(/^[\w.-]{1,64}$/, "category: letters, digits, _ . -"))),
});

// Bounded schemas: deeper than 32 levels or larger than 64 KiB is refused (tool-bounds.ts).
const toolSchema = v.pipe(
  toolFields,
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    const problem = schemaProblem(dataset.value.inputSchema);
    if (problem) addIssue({ message: `tool ${dataset.value.name}: ${problem}` });
  }),
);

/** Resources and prompts one VM may announce (each list). */
export const MAX_ITEMS_PER_VM = 1000;

const resourceSchema = v.object({
  uri: v.pipe(
    v.string("uri must be a string"),
    v.minLength(1),
    v.maxLength(2048),
    v.regex(/^[A-Za-z][A-Za-z0-9+.-]*:/, "uri must be an absolute URI"),
  ),
  name: v.pipe(v.string("name must be a string"), v.minLength(1), v.maxLength(256)),
  title: v.optional(v.pipe(v.string(), v.maxLength(256))),
  description: v.optional(v.pipe(v.string(), v.maxLength(4096))),
  mimeType: v.optional(v.pipe(v.string(), v.maxLength(256))),
});

const promptSchema = v.object({
  name: v.pipe(
    v.string("name must be a string"),
    v.regex(TOOL_NAME, "name: letters, digits, _ . - (1-64, starting with a letter or digit)"),
  ),
  title: v.optional(v.pipe(v.string(), v.maxLength(256))),
  description: v.optional(v.pipe(v.string(), v.maxLength(4096))),
  arguments: v.optional(
    v.pipe(
      v.array(
        v.object({
          name: v.pipe(v.string(), v.minLength(1), v.maxLength(128)),
          description: v.optional(v.pipe(v.string(), v.maxLength(1024))),
          required: v.optional(v.boolean()),
        }),
      ),
      v.maxLength(64),
    ),
  ),
});

export const registerParams = v.object({
  /** Resources the VM serves with `resources/read` (docs/vm-agents.md "Resources and prompts"). */
  resources: v.optional(
    v.pipe(
      v.array(resourceSchema, "resources must be an array"),
      v.maxLength(MAX_ITEMS_PER_VM, `at most ${MAX_ITEMS_PER_VM} resources per VM`),
      v.check((items) => new Set(items.map((item) => item.uri)).size === items.length, "resource URIs must be unique"),
    ),
  ),
  /** Prompts the VM serves with `prompts/get`. */
  prompts: v.optional(
    v.pipe(
      v.array(promptSchema, "prompts must be an array"),
      v.maxLength(MAX_ITEMS_PER_VM, `at most ${MAX_ITEMS_PER_VM} prompts per VM`),
      v.check((items) => new Set(items.map((item) => item.name)).size === items.length, "prompt names must be unique"),
    ),
  ),
  tools: v.pipe(
    v.array(toolSchema, "tools must be an array"),
    v.maxLength(MAX_TOOLS_PER_VM, `at most ${MAX_TOOLS_PER_VM} tools per VM`),
    v.check((tools) => new Set(tools.map((tool) => tool.name)).size === tools.length, "tool names must be unique"),
  ),
});

export type VmTool = v.InferOutput<typeof toolSchema>;
export type VmResource = v.InferOutput<typeof resourceSchema>;
export type VmPrompt = v.InferOutput<typeof promptSchema>;

/**
 * A VM should answer `tools/call` with an MCP CallToolResult. Anything else is wrapped, so
 * callers always get one shape: a string becomes text content, other values JSON text plus
 * `structuredContent` when they are objects.
 */
export function toToolResult(value: unknown): ToolResult {
  if (typeof value === "object" && value !== null && Array.isArray((value as { content?: unknown }).content)) {
    return value as ToolResult;
  }
  if (typeof value === "string") return { content: [{ type: "text", text: value }] };
  const text = JSON.stringify(value ?? null);
  const structured = typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  return { content: [{ type: "text", text }], ...(structured ? { structuredContent: structured } : {}) };
}
