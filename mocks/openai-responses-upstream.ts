import { http, HttpResponse, type HttpHandler } from "msw";
import { mentionsJson, openAiError, strictSchemaProblem, textsOf } from "./openai-checks.js";
import { jsonAnswer, toolInput } from "./schema-example.js";
import {
  frameStream,
  reasoningOf,
  scripted,
  sseEvent,
  usageOf,
  wordsOf,
  type MockToolCall,
  type MockTurn,
  type ScriptedProvider,
} from "./scripted-provider.js";

/**
 * msw handlers for OpenAI's Responses API (`POST <baseURL>/responses`; for Azure OpenAI, whose
 * v1 API has the same path, `baseURL` is `<endpoint>/openai/v1`) in its documented wire format,
 * answering the provider-neutral turns of mocks/scripted-provider.ts:
 *
 * - a `response` object whose `output` holds a `reasoning` item (when `reasoning.effort` is set
 *   and not `none`; its `summary` has a `summary_text` only when `reasoning.summary` asks for
 *   one, as the API does), a `message` item with one `output_text` part, and a `function_call`
 *   item per call (`call_id`, `name`, `arguments` as a JSON string, and `namespace` for a
 *   function declared inside a `namespace` tool); `usage` with `input_tokens` (cached ones
 *   included, and in `input_tokens_details`) and `output_tokens` (reasoning included, and in
 *   `output_tokens_details`);
 * - with `stream: true`, the typed events (`event:` and `data:` lines, each with its
 *   `sequence_number`): `response.created`, `response.in_progress`, per item
 *   `response.output_item.added` … `response.output_item.done` with the reasoning summary's
 *   `response.reasoning_summary_part.*` and `response.reasoning_summary_text.*`, the message's
 *   `response.content_part.*` and `response.output_text.*` (word by word), a call's
 *   `response.function_call_arguments.delta` (in two pieces) and `.done`; then
 *   `response.completed` (or `response.incomplete`) with the whole response and its usage, or
 *   `response.failed` for a scripted in-stream error.
 *
 * An unscripted model echoes the last user text, or honours what the request asks: `text.format`
 * `json_schema` (JSON of the schema; mocks/schema-example.ts) or `json_object`; a forced
 * `tool_choice` (a function by name, or `required`: the first function) with a call whose
 * arguments are an example of its parameters. `max_output_tokens` below what the turn needs
 * (one token per word, reasoning included) cuts the answer: status `incomplete`,
 * `incomplete_details.reason` `max_output_tokens`; so does a scripted `finish: "length"`.
 *
 * The API's 400s are mirrored where they are known: chat completions fields it does not have
 * (`Unknown parameter`, or `Unsupported parameter` for those that moved: `response_format`,
 * `reasoning_effort`), `max_output_tokens` under 16, a `json_schema` format without its name or
 * schema, a strict schema outside the Structured Outputs subset, JSON mode without the word
 * "json" in the input messages, a function tool without a name (the chat format's nested
 * `function`), and a `function_call_output` whose call is not in the input.
 */

type Item = Record<string, any>;

/** Chat completions fields the Responses API refuses, and where those that moved went. */
const MOVED: Readonly<Record<string, string>> = { response_format: "text.format", reasoning_effort: "reasoning.effort" };
const UNKNOWN = [
  "messages",
  "max_tokens",
  "max_completion_tokens",
  "stop",
  "seed",
  "n",
  "logprobs",
  "frequency_penalty",
  "presence_penalty",
  "logit_bias",
  "functions",
  "function_call",
  "system",
];

const CREATED = 1_700_000_000;

export function createOpenAiResponsesUpstream(baseURL: string): ScriptedProvider & { handlers: HttpHandler[] } {
  const provider = scripted();
  const handler = http.post(`${baseURL.replace(/\/+$/, "")}/responses`, async ({ request }) => {
    const body = provider.record(request, await request.text());
    const refused = badRequest(body);
    if (refused) return refused;
    const n = provider.calls.length;
    const echo = echoOf(body.input);
    const behaviour = provider.behaviour(String(body.model), body, echo, () => unscriptedTurn(body, echo, n));
    if (behaviour.kind === "error")
      return HttpResponse.json(behaviour.body as any, { status: behaviour.status, headers: behaviour.headers });
    const turn = behaviour.turn;
    const effort = body.reasoning?.effort;
    const reasoning = effort != null && effort !== "none" ? reasoningOf(turn, echo) : undefined;
    const summary = reasoning !== undefined && body.reasoning?.summary ? reasoning : undefined;
    const usage = usageOf(turn, reasoning);

    // The cap counts reasoning and answer alike: what does not fit is not written.
    let text = turn.text;
    let calls = turn.toolCalls ?? [];
    let incomplete = turn.finish === "length";
    const cap = body.max_output_tokens;
    if (typeof cap === "number" && usage.output + usage.thoughts > cap) {
      incomplete = true;
      usage.thoughts = Math.min(usage.thoughts, cap);
      usage.output = cap - usage.thoughts;
      text = text === undefined ? undefined : wordsOf(text).slice(0, usage.output).join("");
      calls = [];
    }

    const output: Item[] = [];
    if (reasoning !== undefined)
      output.push({
        id: `rs_mock${n}`,
        type: "reasoning",
        summary: summary !== undefined ? [{ type: "summary_text", text: summary }] : [],
        encrypted_content: Buffer.from(`mock-reasoning:${n}`).toString("base64"),
      });
    if (text !== undefined)
      output.push({
        id: `msg_mock${n}`,
        type: "message",
        status: incomplete ? "incomplete" : "completed",
        role: "assistant",
        content: [{ type: "output_text", text, annotations: [], logprobs: [] }],
      });
    for (const [index, call] of calls.entries()) output.push(callItem(call, body, `fc_mock${n}_${index}`));

    const response = (status: string, items: Item[], usageField: unknown) => ({
      id: `resp_mock${n}`,
      object: "response",
      created_at: CREATED,
      status,
      background: false,
      completed_at: status === "completed" ? CREATED + 1 : null,
      error: null,
      incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
      instructions: body.instructions ?? null,
      max_output_tokens: body.max_output_tokens ?? null,
      max_tool_calls: body.max_tool_calls ?? null,
      model: body.model,
      output: items,
      parallel_tool_calls: body.parallel_tool_calls ?? true,
      previous_response_id: body.previous_response_id ?? null,
      prompt_cache_key: body.prompt_cache_key ?? null,
      reasoning: { effort: effort ?? null, summary: body.reasoning?.summary ?? null },
      safety_identifier: body.safety_identifier ?? null,
      service_tier: "default",
      store: body.store ?? true,
      temperature: body.temperature ?? 1,
      text: { format: body.text?.format ?? { type: "text" }, verbosity: body.text?.verbosity ?? "medium" },
      tool_choice: body.tool_choice ?? "auto",
      tools: body.tools ?? [],
      top_logprobs: body.top_logprobs ?? 0,
      top_p: body.top_p ?? 1,
      truncation: body.truncation ?? "disabled",
      usage: usageField,
      user: null,
      metadata: body.metadata ?? {},
    });
    const prompt = usage.input + usage.cacheRead + usage.cacheWrite;
    const usageJson = {
      input_tokens: prompt,
      input_tokens_details: { cached_tokens: usage.cacheRead, cache_write_tokens: usage.cacheWrite },
      output_tokens: usage.output + usage.thoughts,
      output_tokens_details: { reasoning_tokens: usage.thoughts },
      total_tokens: prompt + usage.output + usage.thoughts,
    };
    const status = incomplete ? "incomplete" : "completed";
    if (!body.stream) return HttpResponse.json(response(status, output, usageJson));

    const frames: Uint8Array[] = [];
    let sequence = 0;
    const emit = (type: string, fields: Record<string, unknown>) =>
      frames.push(sseEvent({ type, ...fields, sequence_number: sequence++ }, type));
    const started = response("in_progress", [], null);
    emit("response.created", { response: started });
    emit("response.in_progress", { response: started });
    output.forEach((item, output_index) => {
      const item_id = item.id;
      if (item.type === "reasoning") {
        emit("response.output_item.added", { output_index, item: { ...item, summary: [] } });
        for (const [summary_index, part] of (item.summary as Item[]).entries()) {
          emit("response.reasoning_summary_part.added", { item_id, output_index, summary_index, part: { type: "summary_text", text: "" } });
          for (const delta of wordsOf(part.text))
            emit("response.reasoning_summary_text.delta", { item_id, output_index, summary_index, delta });
          emit("response.reasoning_summary_text.done", { item_id, output_index, summary_index, text: part.text });
          emit("response.reasoning_summary_part.done", { item_id, output_index, summary_index, part });
        }
      } else if (item.type === "message") {
        const part = item.content[0];
        emit("response.output_item.added", { output_index, item: { ...item, status: "in_progress", content: [] } });
        emit("response.content_part.added", { item_id, output_index, content_index: 0, part: { ...part, text: "" } });
        for (const delta of wordsOf(part.text))
          emit("response.output_text.delta", { item_id, output_index, content_index: 0, delta, logprobs: [] });
        emit("response.output_text.done", { item_id, output_index, content_index: 0, text: part.text, logprobs: [] });
        emit("response.content_part.done", { item_id, output_index, content_index: 0, part });
      } else {
        emit("response.output_item.added", { output_index, item: { ...item, status: "in_progress", arguments: "" } });
        const half = Math.floor(item.arguments.length / 2);
        for (const delta of [item.arguments.slice(0, half), item.arguments.slice(half)])
          if (delta) emit("response.function_call_arguments.delta", { item_id, output_index, delta });
        emit("response.function_call_arguments.done", { item_id, output_index, name: item.name, arguments: item.arguments });
      }
      emit("response.output_item.done", { output_index, item });
    });
    emit(`response.${status}`, { response: response(status, output, usageJson) });
    if (behaviour.kind === "stream-error") {
      frames.splice(behaviour.after, frames.length);
      sequence = behaviour.after;
      emit("response.failed", {
        response: {
          ...response("failed", [], null),
          error: { code: "server_error", message: "The server had an error processing your request. Sorry about that!" },
        },
      });
    }
    return frameStream(frames, "text/event-stream", behaviour.kind === "cut" ? behaviour.after : undefined);
  });
  return { ...provider, handlers: [handler] };
}

/** The text of the input's last user message (`input` a string is one). */
function echoOf(input: unknown): string {
  if (typeof input === "string") return input;
  const items = Array.isArray(input) ? (input as Item[]) : [];
  const last = [...items].reverse().find((item) => item?.role === "user" && (item.type === undefined || item.type === "message"));
  return textsOf(last?.content).join("");
}

/** The function tools of a request, those inside `namespace` tools with their namespace. */
function functionsOf(body: any): { name: string; parameters?: unknown; namespace?: string }[] {
  const out: { name: string; parameters?: unknown; namespace?: string }[] = [];
  for (const tool of Array.isArray(body?.tools) ? body.tools : []) {
    if (tool?.type === "function") out.push({ name: tool.name, parameters: tool.parameters });
    if (tool?.type === "namespace")
      for (const inner of Array.isArray(tool.tools) ? tool.tools : [])
        if (inner?.type === "function") out.push({ name: inner.name, parameters: inner.parameters, namespace: tool.name });
  }
  return out;
}

/**
 * A call as a `function_call` item. A call names its namespace, or is found by its name among
 * the functions of the request's `namespace` tools (by `<namespace>__<name>` too, the form a
 * flattened namespace takes); a top-level function of that name has none.
 */
function callItem(call: MockToolCall, body: any, id: string): Item {
  let name = call.name;
  let namespace = call.namespace;
  if (namespace === undefined) {
    const functions = functionsOf(body);
    if (!functions.some((fn) => fn.namespace === undefined && fn.name === name)) {
      const inner = functions.find((fn) => fn.namespace !== undefined && fn.name === name);
      const split = functions.find((fn) => fn.namespace !== undefined && `${fn.namespace}__${fn.name}` === name);
      namespace = inner?.namespace ?? split?.namespace;
      if (split && !inner) name = split.name;
    }
  }
  return {
    id,
    type: "function_call",
    status: "completed",
    arguments: JSON.stringify(call.input),
    call_id: call.id,
    name,
    ...(namespace !== undefined ? { namespace } : {}),
  };
}

/** An unscripted model's turn: the forced function's call, JSON of `text.format`, or the echoed text. */
function unscriptedTurn(body: any, echo: string, n: number): MockTurn {
  const functions = functionsOf(body);
  const choice = body.tool_choice;
  const forced =
    choice === "required"
      ? functions[0]
      : choice?.type === "function"
        ? functions.find((fn) => fn.name === choice.name && fn.namespace === undefined)
        : undefined;
  if (forced) {
    const input = toolInput(forced.parameters, echo);
    return {
      toolCalls: [{ id: `call_mock${n}_0`, name: forced.name, input, ...(forced.namespace ? { namespace: forced.namespace } : {}) }],
    };
  }
  const format = body.text?.format;
  if (format?.type === "json_schema") return { text: jsonAnswer(format.schema, echo) };
  if (format?.type === "json_object") return { text: jsonAnswer(undefined, echo) };
  return { text: echo };
}

/** The API's 400 for a request it does not take, worded as the API words it. */
function badRequest(body: any): HttpResponse<any> | undefined {
  if (!body || typeof body !== "object" || Array.isArray(body))
    return openAiError(
      "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. " +
        "The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, " +
        "please contact us through our help center at help.openai.com.)",
      null,
      null,
    );
  for (const [field, to] of Object.entries(MOVED))
    if (field in body)
      return openAiError(
        `Unsupported parameter: '${field}'. In the Responses API, this parameter has moved to '${to}'. Try again with the new parameter. ` +
          "See the API documentation for more information: https://platform.openai.com/docs/api-reference/responses/create.",
        field,
        "unsupported_parameter",
      );
  const unknown = UNKNOWN.find((field) => field in body);
  if (unknown) return openAiError(`Unknown parameter: '${unknown}'.`, unknown, "unknown_parameter");
  const cap = body.max_output_tokens;
  if (typeof cap === "number" && cap < 16)
    return openAiError(
      `Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got ${cap} instead.`,
      "max_output_tokens",
      "integer_below_min_value",
    );
  const tools: Item[] = Array.isArray(body.tools) ? body.tools : [];
  for (const [index, tool] of tools.entries()) {
    const missing = (path: string) => openAiError(`Missing required parameter: '${path}'.`, path, "missing_required_parameter");
    if (tool?.type === "function" && typeof tool.name !== "string") return missing(`tools[${index}].name`);
    if (tool?.type === "namespace") {
      if (typeof tool.name !== "string") return missing(`tools[${index}].name`);
      if (!Array.isArray(tool.tools)) return missing(`tools[${index}].tools`);
      const unnamed = (tool.tools as Item[]).findIndex((inner) => typeof inner?.name !== "string");
      if (unnamed >= 0) return missing(`tools[${index}].tools[${unnamed}].name`);
    }
  }
  const format = body.text?.format;
  if (format?.type === "json_schema") {
    for (const field of ["name", "schema"])
      if (format[field] === undefined)
        return openAiError(`Missing required parameter: 'text.format.${field}'.`, `text.format.${field}`, "missing_required_parameter");
    const problem = format.strict === true ? strictSchemaProblem(format.schema) : undefined;
    if (problem)
      return openAiError(`Invalid schema for response_format '${format.name}': ${problem}`, "text.format.schema", "invalid_json_schema");
  }
  const items: Item[] =
    typeof body.input === "string" ? [{ role: "user", content: body.input }] : Array.isArray(body.input) ? body.input : [];
  if (format?.type === "json_object") {
    // The input's messages, not `instructions`, must say it.
    const texts = items.filter((item) => item?.role !== undefined).flatMap((item) => textsOf(item.content));
    if (!mentionsJson(texts))
      return openAiError(
        "Response input messages must contain the word 'json' in some form to use 'text.format' of type 'json_object'.",
        "text.format",
        null,
      );
  }
  // Statelessly (no previous response or conversation), a call's output needs the call in the input.
  if (body.previous_response_id == null && body.conversation == null) {
    const called = new Set(items.filter((item) => item?.type === "function_call").map((item) => item.call_id));
    const orphan = items.find((item) => item?.type === "function_call_output" && !called.has(item.call_id));
    if (orphan) return openAiError(`No tool call found for function call output with call_id ${orphan.call_id}.`, "input", null);
  }
  return undefined;
}
