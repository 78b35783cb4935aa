import { http, HttpResponse, type HttpHandler } from "msw";
import { mentionsJson, openAiError, strictSchemaProblem, textsOf } from "./openai-checks.js";
import { jsonAnswer, toolInput } from "./schema-example.js";
import { frameStream, scripted, usageOf, wordsOf, type MockTurn, type ScriptedProvider } from "./scripted-provider.js";

/**
 * msw handlers for the chat completions wire format (`POST <baseURL>/chat/completions`, the
 * `openai-compatible` and `azure-openai` providers; for Azure, `baseURL` is
 * `<endpoint>/openai/deployments/<deployment>`) answering the provider-neutral turns of
 * mocks/scripted-provider.ts, as the native mocks do: a `chat.completion` with
 * `message.tool_calls`, or `chat.completion.chunk` frames (the first with the role, text word
 * by word, each tool call's id and name then its arguments in two pieces, the finish reason,
 * the usage frame when `stream_options.include_usage` asks for it, `[DONE]`). Cached prompt
 * tokens are inside `prompt_tokens` (`prompt_tokens_details.cached_tokens`), reasoning tokens
 * inside `completion_tokens` (`completion_tokens_details.reasoning_tokens`). Scripts are keyed
 * by the `model` of the body (the deployment's upstream model).
 *
 * With `azure`, answers carry Azure OpenAI's content filtering results as it documents them:
 * `prompt_filter_results` on the answer, and as a stream's first chunk (no choices; `id`,
 * `object` and `model` empty, `created` 0); `content_filter_results` on each choice; and with
 * asynchronous filtering, annotation chunks whose choice has no `delta`
 * (`content_filter_offsets`), one after the text.
 *
 * Structured output as the API does it: with `response_format` `json_schema` an unscripted model
 * answers JSON of the schema (strings are the echoed text; mocks/schema-example.ts), with
 * `json_object` a JSON object; the API's 400s for a JSON mode request whose messages never say
 * "json", a `json_schema` without a name, and a strict schema outside the Structured Outputs
 * subset (mocks/openai-checks.ts).
 */
const SAFE = {
  hate: { filtered: false, severity: "safe" },
  self_harm: { filtered: false, severity: "safe" },
  sexual: { filtered: false, severity: "safe" },
  violence: { filtered: false, severity: "safe" },
};
const PROMPT_FILTER_RESULTS = [{ prompt_index: 0, content_filter_results: { ...SAFE, jailbreak: { filtered: false, detected: false } } }];

export function createOpenAiChatUpstream(
  baseURL: string,
  options: { azure?: boolean } = {},
): ScriptedProvider & { handlers: HttpHandler[] } {
  const azure = options.azure === true;
  const provider = scripted();
  const handler = http.post(`${baseURL.replace(/\/+$/, "")}/chat/completions`, async ({ request }) => {
    const body = provider.record(request, await request.text());
    const refused = badRequest(body);
    if (refused) return refused;
    const lastUser = [...(body?.messages ?? [])].reverse().find((message: any) => message.role === "user");
    const echo =
      typeof lastUser?.content === "string" ? lastUser.content : (lastUser?.content ?? []).map((part: any) => part.text ?? "").join("");
    const format = body?.response_format;
    const forced = forcedFunction(body);
    const behaviour = provider.behaviour(String(body?.model), body, echo, () =>
      forced
        ? {
            toolCalls: [{ id: `call_mock${provider.calls.length}_0`, name: forced.name, input: toolInput(forced.parameters, echo) }],
          }
        : {
            text:
              format?.type === "json_schema"
                ? jsonAnswer(format.json_schema?.schema, echo)
                : format?.type === "json_object"
                  ? jsonAnswer(undefined, echo)
                  : echo,
          },
    );
    if (behaviour.kind === "error")
      return HttpResponse.json(behaviour.body as any, { status: behaviour.status, headers: behaviour.headers });
    const turn = behaviour.turn;
    const id = `chatcmpl-mock-${provider.calls.length}`;
    const finish = turn.toolCalls?.length ? "tool_calls" : turn.finish === "length" ? "length" : "stop";
    const usage = usageJson(turn);
    const toolCalls = (turn.toolCalls ?? []).map((call) => ({
      id: call.id,
      type: "function" as const,
      function: { name: call.name, arguments: JSON.stringify(call.input) },
    }));
    if (!body.stream) {
      return HttpResponse.json({
        id,
        object: "chat.completion",
        created: 1,
        model: body.model,
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: turn.text ?? null,
              ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
              refusal: null,
            },
            logprobs: null,
            finish_reason: finish,
            ...(azure ? { content_filter_results: SAFE } : {}),
          },
        ],
        usage,
        ...(azure ? { prompt_filter_results: PROMPT_FILTER_RESULTS } : {}),
      });
    }
    const encoder = new TextEncoder();
    const frame = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      encoder.encode(
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model: body.model, choices, ...extra })}\n\n`,
      );
    const delta = (fields: Record<string, unknown>, finishReason: string | null = null) =>
      frame([
        {
          index: 0,
          delta: fields,
          logprobs: null,
          finish_reason: finishReason,
          ...(azure && fields.content ? { content_filter_results: SAFE } : {}),
        },
      ]);
    const annotation = (extra: Record<string, unknown>) =>
      encoder.encode(`data: ${JSON.stringify({ id: "", object: "", created: 0, model: "", ...extra })}\n\n`);
    const frames: Uint8Array[] = [];
    if (azure) frames.push(annotation({ choices: [], prompt_filter_results: PROMPT_FILTER_RESULTS }));
    frames.push(delta({ role: "assistant", content: "", refusal: null }));
    for (const word of wordsOf(turn.text ?? "")) frames.push(delta({ content: word }));
    if (azure && turn.text) {
      const end = turn.text.length;
      frames.push(
        annotation({
          choices: [
            {
              index: 0,
              finish_reason: null,
              content_filter_results: SAFE,
              content_filter_offsets: { check_offset: 0, start_offset: 0, end_offset: end },
            },
          ],
          usage: null,
        }),
      );
    }
    for (const [index, call] of toolCalls.entries()) {
      frames.push(delta({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }] }));
      const half = Math.floor(call.function.arguments.length / 2);
      for (const part of [call.function.arguments.slice(0, half), call.function.arguments.slice(half)])
        frames.push(delta({ tool_calls: [{ index, function: { arguments: part } }] }));
    }
    frames.push(delta({}, finish));
    if (body.stream_options?.include_usage) frames.push(frame([], { usage }));
    frames.push(encoder.encode("data: [DONE]\n\n"));
    if (behaviour.kind === "stream-error") {
      frames.splice(
        behaviour.after,
        frames.length,
        encoder.encode(
          `data: ${JSON.stringify({ error: { message: "The server had an error while processing your request.", type: "server_error", code: 500 } })}\n\n`,
        ),
      );
    }
    return frameStream(frames, "text/event-stream", behaviour.kind === "cut" ? behaviour.after : undefined);
  });
  return { ...provider, handlers: [handler] };
}

/** The API's 400 for a `response_format` it does not take. */
function badRequest(body: any): HttpResponse<any> | undefined {
  const format = body?.response_format;
  if (format?.type === "json_object") {
    const texts = (body.messages ?? []).flatMap((message: any) => textsOf(message?.content));
    if (!mentionsJson(texts))
      return openAiError(
        "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.",
        "messages",
        null,
      );
  }
  if (format?.type === "json_schema") {
    const schema = format.json_schema;
    if (typeof schema?.name !== "string")
      return openAiError(
        "Missing required parameter: 'response_format.json_schema.name'.",
        "response_format.json_schema.name",
        "missing_required_parameter",
      );
    const problem = schema.strict === true ? strictSchemaProblem(schema.schema) : undefined;
    if (problem)
      return openAiError(`Invalid schema for response_format '${schema.name}': ${problem}`, "response_format", "invalid_json_schema");
  }
  return undefined;
}

function usageJson(turn: MockTurn) {
  const usage = usageOf(turn);
  const prompt = usage.input + usage.cacheRead + usage.cacheWrite;
  const completion = usage.output + usage.thoughts;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: usage.cacheRead },
    completion_tokens_details: { reasoning_tokens: usage.thoughts },
  };
}

/** The function a `tool_choice` forces: the named one, or for `required` the first, as the API calls it. */
function forcedFunction(body: any): { name: string; parameters?: unknown } | undefined {
  const functions = (body?.tools ?? []).filter((tool: any) => tool?.type === "function").map((tool: any) => tool.function);
  const choice = body?.tool_choice;
  if (choice === "required") return functions[0];
  if (choice?.type === "function") return functions.find((fn: any) => fn?.name === choice.function?.name);
  return undefined;
}
