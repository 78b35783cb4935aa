import { http, HttpResponse, type HttpHandler } from "msw";
import { mockVector, recorder, type EmbeddingsMock } from "./embedding-vectors.js";

/** Dimensions of a mock Gemini embedding when the request asks for none. */
export const GEMINI_MOCK_DIMENSIONS = 12;

/**
 * msw handlers for the Gemini API's `POST <baseURL>/models/<model>:batchEmbedContents` in its
 * documented wire format: `requests[]` of `EmbedContentRequest` (`model` `models/<model>`,
 * the same as the path's; `content.parts[].text`; `outputDimensionality`; `taskType`), at most
 * 100 per call (more is `400 INVALID_ARGUMENT`, as Gemini answers); the answer is
 * `{embeddings: [{values}]}` in the requests' order, with no usage. Requests are recorded;
 * failures scripted per model.
 */
export function createGeminiEmbeddingsUpstream(baseURL: string): EmbeddingsMock & { handlers: HttpHandler[] } {
  const mock = recorder();
  const invalid = (message: string) => HttpResponse.json({ error: { code: 400, message, status: "INVALID_ARGUMENT" } }, { status: 400 });
  const handler = http.post(`${baseURL.replace(/\/+$/, "")}/models/:call`, async ({ request, params }) => {
    const body = mock.record(request, await request.text());
    const call = decodeURIComponent(String(params.call));
    const [model, method] = [call.slice(0, call.lastIndexOf(":")), call.slice(call.lastIndexOf(":") + 1)];
    if (method !== "batchEmbedContents")
      return HttpResponse.json({ error: { code: 404, message: `Method ${method} not found`, status: "NOT_FOUND" } }, { status: 404 });
    const failure = mock.failure(model);
    if (failure) return HttpResponse.json(failure.body as any, { status: failure.status, headers: failure.headers });
    const requests = body?.requests;
    if (!Array.isArray(requests) || requests.length === 0) return invalid("* BatchEmbedContentsRequest.requests: must not be empty");
    if (requests.length > 100) return invalid("* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch");
    const embeddings = [];
    for (const item of requests) {
      if (item?.model !== `models/${model}`) return invalid(`* BatchEmbedContentsRequest.requests[].model: must be models/${model}`);
      const text = (item.content?.parts ?? []).map((part: any) => part.text ?? "").join("");
      embeddings.push({ values: mockVector(text, item.outputDimensionality ?? GEMINI_MOCK_DIMENSIONS) });
    }
    return HttpResponse.json({ embeddings });
  });
  return { ...mock, handlers: [handler] };
}
