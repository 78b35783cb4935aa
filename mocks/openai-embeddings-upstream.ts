import { http, HttpResponse, type HttpHandler } from "msw";
import { mockTokens, mockVector, recorder, type EmbeddingsMock } from "./embedding-vectors.js";

/** Dimensions of a mock OpenAI embedding when the request asks for none. */
export const OPENAI_MOCK_DIMENSIONS = 8;

/**
 * msw handlers for OpenAI's embeddings API in its documented wire format
 * (`POST <baseURL>/embeddings`; for Azure OpenAI, `baseURL` is
 * `<endpoint>/openai/deployments/<deployment>` and the call carries `?api-version=`):
 * `input` as a string, strings, token ids or token id arrays; `encoding_format` `float`
 * (default) or `base64` (little-endian float32); `dimensions`. The answer is a `list` of
 * `embedding` objects, each with its `index` (sent last first, which the format allows: the
 * index is the order), the upstream's `model` and `usage` (`prompt_tokens` = `total_tokens`).
 * Requests are recorded; failures scripted per model.
 */
export function createOpenAiEmbeddingsUpstream(baseURL: string): EmbeddingsMock & { handlers: HttpHandler[] } {
  const mock = recorder();
  const handler = http.post(`${baseURL.replace(/\/+$/, "")}/embeddings`, async ({ request }) => {
    const body = mock.record(request, await request.text());
    const failure = mock.failure(String(body?.model));
    if (failure) return HttpResponse.json(failure.body as any, { status: failure.status, headers: failure.headers });
    const input = body?.input;
    const inputs: (string | number[])[] = typeof input === "string" ? [input] : typeof input?.[0] === "number" ? [input] : input;
    if (!Array.isArray(inputs) || inputs.length === 0)
      return HttpResponse.json(
        { error: { message: "'input' is a required property", type: "invalid_request_error", param: "input", code: null } },
        { status: 400 },
      );
    const dimensions = body.dimensions ?? OPENAI_MOCK_DIMENSIONS;
    const data = inputs.map((item, index) => {
      const vector = mockVector(item, dimensions);
      const embedding = body.encoding_format === "base64" ? Buffer.from(new Float32Array(vector).buffer).toString("base64") : vector;
      return { object: "embedding", index, embedding };
    });
    const tokens = inputs.reduce((sum, item) => sum + mockTokens(item), 0);
    return HttpResponse.json({
      object: "list",
      data: data.reverse(),
      model: body.model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    });
  });
  return { ...mock, handlers: [handler] };
}
