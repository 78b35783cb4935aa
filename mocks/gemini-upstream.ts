import { http, HttpResponse, type HttpHandler } from "msw";
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
 * msw handlers for Google's Generative Language API in its documented wire format:
 * `POST <baseURL>/models/<model>:generateContent` answers one `GenerateContentResponse`;
 * `:streamGenerateContent?alt=sse` sends one per SSE event (no [DONE]: the stream's end is
 * the end), text parts word by word, each `functionCall` whole, the last one with
 * `finishReason` and `usageMetadata`. Requests are recorded; answers scripted per model.
 * With `callIds` it answers as Gemini 3 does: every `functionCall` carries an `id` (the
 * scripted one), and a call's `signature` is its part's `thoughtSignature`; Gemini 2.x gives
 * calls no id.
 *
 * With `generationConfig.responseMimeType: "application/json"` an unscripted model answers JSON
 * of `responseJsonSchema` (or of `responseSchema`, the OpenAPI subset with its upper-case types;
 * any object without either; mocks/schema-example.ts). A `thinkingConfig` whose budget is not 0
 * makes the model think: its tokens are `usageMetadata.thoughtsTokenCount` (apart from
 * `candidatesTokenCount`), and with `includeThoughts` the thought summary comes first as parts
 * with `thought: true` (streamed word by word like the text).
 */
export function createGeminiUpstream(baseURL: string, options: { callIds?: boolean } = {}): ScriptedProvider & { handlers: HttpHandler[] } {
  const provider = scripted();
  const handler = http.post(`${baseURL.replace(/\/+$/, "")}/models/:call`, async ({ request, params }) => {
    const body = provider.record(request, await request.text());
    const call = decodeURIComponent(String(params.call));
    const cut = call.lastIndexOf(":");
    const model = call.slice(0, cut);
    const method = call.slice(cut + 1);
    if (method !== "generateContent" && method !== "streamGenerateContent") {
      return HttpResponse.json({ error: { code: 404, message: `Method ${method} not found`, status: "NOT_FOUND" } }, { status: 404 });
    }
    const lastUser = [...(body?.contents ?? [])].reverse().find((content: any) => content.role === "user");
    const echo = (lastUser?.parts ?? []).map((part: any) => part.text ?? "").join("");
    const generation = body?.generationConfig ?? {};
    const forced = forcedFunction(body);
    const behaviour = provider.behaviour(model, body, echo, () =>
      forced
        ? {
            toolCalls: [{ id: `call_mock${provider.calls.length}_0`, name: forced.name, input: toolInput(forced.parameters, echo) }],
          }
        : {
            text:
              generation.responseMimeType === "application/json"
                ? jsonAnswer(generation.responseJsonSchema ?? generation.responseSchema, echo)
                : echo,
          },
    );
    if (behaviour.kind === "error")
      return HttpResponse.json(behaviour.body as any, { status: behaviour.status, headers: behaviour.headers });
    const turn = behaviour.turn;
    const thinking = generation.thinkingConfig;
    const thinks = thinking !== undefined && thinking !== null && thinking.thinkingBudget !== 0;
    const reasoning = thinks ? reasoningOf(turn, echo) : undefined;
    const thought = thinks && thinking.includeThoughts === true ? reasoning : undefined;
    const usage = usageOf(turn, reasoning);
    // promptTokenCount includes the cached part; thoughts are counted apart from the candidates.
    const prompt = usage.input + usage.cacheRead + usage.cacheWrite;
    const usageMetadata = {
      promptTokenCount: prompt,
      candidatesTokenCount: usage.output,
      totalTokenCount: prompt + usage.output + usage.thoughts,
      ...(usage.cacheRead ? { cachedContentTokenCount: usage.cacheRead } : {}),
      ...(usage.thoughts ? { thoughtsTokenCount: usage.thoughts } : {}),
    };
    const finishReason = turn.finish === "length" ? "MAX_TOKENS" : "STOP";
    const responseId = `resp-${provider.calls.length}`;
    if (method === "generateContent") {
      return HttpResponse.json({
        candidates: [
          {
            content: { role: "model", parts: [...(thought ? [{ text: thought, thought: true }] : []), ...partsOf(turn, options.callIds)] },
            finishReason,
            index: 0,
          },
        ],
        usageMetadata,
        modelVersion: model,
        responseId,
      });
    }
    if (new URL(request.url).searchParams.get("alt") !== "sse")
      return HttpResponse.json(
        { error: { code: 400, message: "this mock speaks alt=sse only", status: "INVALID_ARGUMENT" } },
        { status: 400 },
      );
    const response = (parts: unknown[], extra: Record<string, unknown> = {}) =>
      sseEvent({ candidates: [{ content: { role: "model", parts }, index: 0, ...extra }], modelVersion: model, responseId });
    const frames = [
      ...wordsOf(thought ?? "").map((word) => response([{ text: word, thought: true }])),
      ...wordsOf(turn.text ?? "").map((word) => response([{ text: word }])),
    ];
    for (const call of turn.toolCalls ?? []) frames.push(response([callPart(call, options.callIds)]));
    frames.push(
      sseEvent({
        candidates: [{ content: { role: "model", parts: [{ text: "" }] }, finishReason, index: 0 }],
        usageMetadata,
        modelVersion: model,
        responseId,
      }),
    );
    if (behaviour.kind === "stream-error") {
      frames.splice(
        behaviour.after,
        frames.length,
        sseEvent({ error: { code: 503, message: "The model is overloaded.", status: "UNAVAILABLE" } }),
      );
    }
    return frameStream(frames, "text/event-stream", behaviour.kind === "cut" ? behaviour.after : undefined);
  });
  return { ...provider, handlers: [handler] };
}

function partsOf(turn: MockTurn, callIds = false): unknown[] {
  const parts: unknown[] = [];
  if (turn.text !== undefined) parts.push({ text: turn.text });
  for (const call of turn.toolCalls ?? []) parts.push(callPart(call, callIds));
  return parts;
}

function callPart(call: MockToolCall, callIds = false): Record<string, unknown> {
  return {
    functionCall: { ...(callIds ? { id: call.id } : {}), name: call.name, args: call.input },
    ...(call.signature ? { thoughtSignature: call.signature } : {}),
  };
}

/** The function `toolConfig` forces (`ANY`): the one of `allowedFunctionNames`, or the first, as the API calls it. */
function forcedFunction(body: any): { name: string; parameters?: unknown } | undefined {
  const config = body?.toolConfig?.functionCallingConfig;
  if (config?.mode !== "ANY") return undefined;
  const declarations = (body?.tools ?? []).flatMap((tool: any) => tool?.functionDeclarations ?? []);
  const allowed: string[] | undefined = config.allowedFunctionNames;
  return allowed?.length ? declarations.find((fn: any) => allowed.includes(fn?.name)) : declarations[0];
}
