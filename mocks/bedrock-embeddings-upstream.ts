import { http, HttpResponse, type HttpHandler } from "msw";
import { mockTokens, mockVector, recorder, type EmbeddingsMock } from "./embedding-vectors.js";

/**
 * msw handlers for Amazon Bedrock's InvokeModel (`POST <endpoint>/model/<modelId>/invoke`) with
 * the embedding models' documented bodies:
 * - Titan Text Embeddings v2 (`amazon.titan-embed-text-v2:0`): `{inputText, dimensions?,
 *   normalize?}`, dimensions 256, 512 or 1024 (default); the answer `{embedding,
 *   inputTextTokenCount, embeddingsByType: {float}}` and the `X-Amzn-Bedrock-Input-Token-Count`
 *   header;
 * - Cohere Embed (`cohere.embed-…`): `{texts (at most 96), input_type (required), truncate?,
 *   output_dimension?}`; the answer `{id, embeddings, response_type: "embeddings_floats",
 *   texts}` (1024 dimensions by default) with no token count, as Bedrock sends none for Cohere.
 * Errors are Bedrock's `{message}` with `x-amzn-errortype`. Requests are recorded (signature
 * headers included); failures scripted per model id.
 */
export function createBedrockEmbeddingsUpstream(baseURL: string): EmbeddingsMock & { handlers: HttpHandler[] } {
  const mock = recorder();
  const invalid = (message: string) =>
    HttpResponse.json(
      { message },
      { status: 400, headers: { "x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/" } },
    );
  const handler = http.post(`${baseURL.replace(/\/+$/, "")}/model/:modelId/invoke`, async ({ request, params }) => {
    const body = mock.record(request, await request.text());
    const model = decodeURIComponent(String(params.modelId));
    const failure = mock.failure(model);
    if (failure) return HttpResponse.json(failure.body as any, { status: failure.status, headers: failure.headers });
    if (model.includes("amazon.titan-embed-text")) {
      if (typeof body?.inputText !== "string" || !body.inputText)
        return invalid("Malformed input request: #/inputText: expected minLength: 1");
      const dimensions = body.dimensions ?? 1024;
      if (![256, 512, 1024].includes(dimensions)) return invalid("Malformed input request: #/dimensions: 256, 512 or 1024");
      const embedding = mockVector(body.inputText, dimensions);
      const tokens = mockTokens(body.inputText);
      return HttpResponse.json(
        { embedding, inputTextTokenCount: tokens, embeddingsByType: { float: embedding } },
        { headers: { "x-amzn-bedrock-input-token-count": String(tokens), "x-amzn-bedrock-invocation-latency": "12" } },
      );
    }
    if (model.includes("cohere.embed")) {
      const texts = body?.texts;
      if (!Array.isArray(texts) || texts.length > 96) return invalid("Malformed input request: #/texts: expected maxItems: 96");
      if (!["search_document", "search_query", "classification", "clustering"].includes(body.input_type))
        return invalid("Malformed input request: #: required key [input_type] not found");
      const dimensions = body.output_dimension ?? 1024;
      return HttpResponse.json({
        id: `cohere-${mock.calls.length}`,
        embeddings: texts.map((text: string) => mockVector(text, dimensions)),
        response_type: "embeddings_floats",
        texts,
      });
    }
    return invalid(`The provided model identifier is invalid: ${model}`);
  });
  return { ...mock, handlers: [handler] };
}
