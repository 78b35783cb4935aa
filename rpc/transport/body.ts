import { ServiceError } from "../errors.js";

const tooLarge = (limit: number) => new ServiceError("PAYLOAD_TOO_LARGE", `Request body exceeds the limit of ${limit} bytes`);

/**
 * Reads a JSON body, refusing more than `limit` bytes whether or not Content-Length says so
 * (chunked uploads are counted as they arrive and cut off at the limit).
 * Returns undefined for an empty body.
 */
export async function readJsonBody(request: Request, limit: number): Promise<unknown> {
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > limit) throw tooLarge(limit);
  if (!request.body) return undefined;

  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  if (size === 0) return undefined;

  const type = request.headers.get("content-type") ?? "";
  if (!/^application\/([\w.+-]+\+)?json\b/i.test(type.trim())) {
    throw new ServiceError("UNSUPPORTED_MEDIA_TYPE", "Content-Type must be application/json");
  }
  const text = Buffer.concat(chunks, size).toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    throw new ServiceError("PARSE_ERROR", "Malformed JSON in request body");
  }
}
