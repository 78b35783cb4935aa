import { http, HttpResponse, type HttpHandler } from "msw";
import { jsonAnswer, toolInput } from "./schema-example.js";
import {
  frameStream,
  reasoningOf,
  scripted,
  sseEvent,
  usageOf,
  wordsOf,
  type MockTurn,
  type ScriptedProvider,
} from "./scripted-provider.js";

/**
 * msw handlers for Anthropic's Messages API (`POST <baseURL>/v1/messages`) in its documented
 * wire format: a `message` object, or (with `stream: true`) the events `message_start`,
 * `content_block_start`, `ping`, `content_block_delta` (`thinking_delta`, `signature_delta`,
 * `text_delta`, `input_json_delta`), `content_block_stop`, `message_delta`, `message_stop`, and
 * `error` for in-stream errors. Requests are recorded; answers are scripted per model
 * (mocks/scripted-provider.ts).
 *
 * What the API does with the fields the gateway translates to: with `output_config.format`
 * (`json_schema`) an unscripted model answers JSON of the schema (strings are the echoed text;
 * mocks/schema-example.ts); a forced tool (`tool_choice` `{type: "tool", name}`, or `{type:
 * "any"}`: the first tool) is answered with a `tool_use` block whose `input` is an example of its
 * `input_schema`; `thinking` (`enabled`, `adaptive`) puts a `thinking` block with its signature
 * before the answer and reports its tokens in `usage.output_tokens_details.thinking_tokens`
 * (they are part of `output_tokens`). The API's 400s (`invalid_request_error`) are mirrored: a
 * role other than user, assistant or system; tool blocks without tools; a thinking budget under
 * 1024 or not under `max_tokens`; thinking with a forced tool; and a structured-output schema
 * with an object that does not set `additionalProperties: false`.
 */
export function createAnthropicUpstream(baseURL: string): ScriptedProvider & { handlers: HttpHandler[] } {
  const provider = scripted();
  const handler = http.post(`${baseURL.replace(/\/+$/, "")}/v1/messages`, async ({ request }) => {
    const body = provider.record(request, await request.text());
    const refused = badRequest(body);
    if (refused) return refused;
    const lastUser = [...(body?.messages ?? [])].reverse().find((message: any) => message.role === "user");
    const echo =
      typeof lastUser?.content === "string" ? lastUser.content : (lastUser?.content ?? []).map((block: any) => block.text ?? "").join("");
    const id = `msg_${provider.calls.length}`;
    const behaviour = provider.behaviour(String(body?.model), body, echo, () => unscriptedTurn(body, echo, id));
    if (behaviour.kind === "error")
      return HttpResponse.json(behaviour.body as any, { status: behaviour.status, headers: behaviour.headers });
    const turn = behaviour.turn;
    const thinking = thinkingOf(body);
    const reasoning = thinking ? reasoningOf(turn, echo) : undefined;
    // `display: "omitted"` keeps the block and its signature, without the text.
    const shown = thinking?.display === "omitted" ? "" : reasoning;
    const signature = Buffer.from(`mock-signature:${id}`).toString("base64");
    const usage = usageOf(turn, reasoning);
    // Thinking counts in output_tokens; cache reads and writes are reported beside input_tokens.
    const promptUsage = {
      input_tokens: usage.input,
      cache_creation_input_tokens: usage.cacheWrite,
      cache_read_input_tokens: usage.cacheRead,
    };
    const outputTokens = usage.output + usage.thoughts;
    const outputDetails = usage.thoughts ? { output_tokens_details: { thinking_tokens: usage.thoughts } } : {};
    const stopReason = turn.toolCalls?.length ? "tool_use" : turn.finish === "length" ? "max_tokens" : "end_turn";
    if (!body.stream) {
      return HttpResponse.json({
        id,
        type: "message",
        role: "assistant",
        model: body.model,
        content: [...(shown !== undefined ? [{ type: "thinking", thinking: shown, signature }] : []), ...contentOf(turn)],
        stop_reason: stopReason,
        stop_sequence: null,
        usage: { ...promptUsage, output_tokens: outputTokens, ...outputDetails },
      });
    }
    const frames = [
      sseEvent(
        {
          type: "message_start",
          message: {
            id,
            type: "message",
            role: "assistant",
            model: body.model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { ...promptUsage, output_tokens: 1 },
          },
        },
        "message_start",
      ),
      sseEvent({ type: "ping" }, "ping"),
    ];
    let index = 0;
    if (shown !== undefined) {
      frames.push(
        sseEvent(
          { type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } },
          "content_block_start",
        ),
      );
      for (const word of wordsOf(shown))
        frames.push(
          sseEvent({ type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: word } }, "content_block_delta"),
        );
      // The signature comes last, just before the block ends.
      frames.push(sseEvent({ type: "content_block_delta", index, delta: { type: "signature_delta", signature } }, "content_block_delta"));
      frames.push(sseEvent({ type: "content_block_stop", index }, "content_block_stop"));
      index++;
    }
    if (turn.text !== undefined) {
      frames.push(sseEvent({ type: "content_block_start", index, content_block: { type: "text", text: "" } }, "content_block_start"));
      for (const word of wordsOf(turn.text))
        frames.push(sseEvent({ type: "content_block_delta", index, delta: { type: "text_delta", text: word } }, "content_block_delta"));
      frames.push(sseEvent({ type: "content_block_stop", index }, "content_block_stop"));
      index++;
    }
    for (const call of turn.toolCalls ?? []) {
      frames.push(
        sseEvent(
          { type: "content_block_start", index, content_block: { type: "tool_use", id: call.id, name: call.name, input: {} } },
          "content_block_start",
        ),
      );
      // A call without input streams only the empty partial_json.
      const json = Object.keys(call.input).length ? JSON.stringify(call.input) : "";
      const half = Math.floor(json.length / 2);
      frames.push(
        sseEvent({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: "" } }, "content_block_delta"),
      );
      for (const part of json ? [json.slice(0, half), json.slice(half)] : [])
        frames.push(
          sseEvent({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: part } }, "content_block_delta"),
        );
      frames.push(sseEvent({ type: "content_block_stop", index }, "content_block_stop"));
      index++;
    }
    frames.push(
      sseEvent(
        {
          type: "message_delta",
          delta: { stop_reason: stopReason, stop_sequence: null },
          usage: { output_tokens: outputTokens, ...outputDetails },
        },
        "message_delta",
      ),
    );
    frames.push(sseEvent({ type: "message_stop" }, "message_stop"));
    if (behaviour.kind === "stream-error") {
      frames.splice(
        behaviour.after,
        frames.length,
        sseEvent({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }, "error"),
      );
    }
    return frameStream(frames, "text/event-stream", behaviour.kind === "cut" ? behaviour.after : undefined);
  });
  return { ...provider, handlers: [handler] };
}

function contentOf(turn: MockTurn): unknown[] {
  const content: unknown[] = [];
  if (turn.text !== undefined) content.push({ type: "text", text: turn.text });
  for (const call of turn.toolCalls ?? []) content.push({ type: "tool_use", id: call.id, name: call.name, input: call.input });
  return content;
}

/** The thinking a request asks for (`enabled` or `adaptive`), if any. */
function thinkingOf(body: any): { display?: string } | undefined {
  const type = body?.thinking?.type;
  return type === "enabled" || type === "adaptive" ? { display: body.thinking.display ?? undefined } : undefined;
}

/** The tool a `tool_choice` forces: the named one, or for `any` the first (client tools only: they have an `input_schema`). */
function forcedTool(body: any): { name: string; input_schema: unknown } | undefined {
  const tools = (body?.tools ?? []).filter((tool: any) => typeof tool?.name === "string" && tool.input_schema);
  const choice = body?.tool_choice;
  if (choice?.type === "tool") return tools.find((tool: any) => tool.name === choice.name);
  if (choice?.type === "any") return tools[0];
  return undefined;
}

/** An unscripted model's turn: the forced tool's call, JSON of the output format's schema, or the echoed text. */
function unscriptedTurn(body: any, echo: string, id: string): MockTurn {
  const tool = forcedTool(body);
  if (tool) {
    return { toolCalls: [{ id: `toolu_${id}_0`, name: tool.name, input: toolInput(tool.input_schema, echo) }] };
  }
  const format = body?.output_config?.format;
  if (format?.type === "json_schema") return { text: jsonAnswer(format.schema, echo) };
  return { text: echo };
}

function invalid(message: string): HttpResponse<any> {
  return HttpResponse.json({ type: "error", error: { type: "invalid_request_error", message } }, { status: 400 });
}

const ROLES = new Set(["user", "assistant", "system"]);

/** The API's 400 for a request it does not take, worded as the API words it. */
function badRequest(body: any): HttpResponse<any> | undefined {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : [];
  const badRole = messages.findIndex((message) => !ROLES.has(message?.role));
  if (badRole >= 0) return invalid(`messages.${badRole}.role: Input should be 'user', 'assistant' or 'system'`);
  // Tool blocks in a request that declares no tools.
  const toolBlocks = messages.some(
    (message) =>
      Array.isArray(message.content) && message.content.some((block: any) => block.type === "tool_use" || block.type === "tool_result"),
  );
  if (toolBlocks && !body?.tools?.length) return invalid("Requests which include `tool_use` or `tool_result` blocks must define tools.");
  if (body?.thinking?.type === "enabled") {
    const budget = body.thinking.budget_tokens;
    if (typeof budget !== "number" || budget < 1024)
      return invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024");
    if (typeof body.max_tokens === "number" && budget >= body.max_tokens)
      return invalid("`max_tokens` must be greater than `thinking.budget_tokens`.");
    if (body.tool_choice?.type === "tool" || body.tool_choice?.type === "any")
      return invalid("Thinking may not be enabled when tool_choice forces tool use.");
  }
  const format = body?.output_config?.format;
  if (format?.type === "json_schema" && openObject(format.schema))
    return invalid("output_config.format.schema: For 'object' type, 'additionalProperties' must be explicitly set to false");
  return undefined;
}

/** Whether a schema has an object that does not set `additionalProperties: false` (structured outputs require it of every one). */
function openObject(node: unknown): boolean {
  if (!node || typeof node !== "object" || Array.isArray(node)) return false;
  const schema = node as Record<string, unknown>;
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types.includes("object") && schema.additionalProperties !== false) return true;
  const children: unknown[] = [];
  for (const key of ["properties", "$defs", "definitions"])
    if (schema[key] && typeof schema[key] === "object") children.push(...Object.values(schema[key] as object));
  for (const key of ["anyOf", "oneOf", "allOf", "prefixItems"])
    if (Array.isArray(schema[key])) children.push(...(schema[key] as unknown[]));
  children.push(schema.items);
  return children.some(openObject);
}
