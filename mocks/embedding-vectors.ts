import { createHash } from "node:crypto";

/**
 * What the embeddings mocks (mocks/openai-embeddings-upstream.ts, gemini-…, bedrock-…) share: a
 * deterministic vector per input, so a test can tell which input's vector came back at which
 * index, and a token count of their own (not the gateway's), so a test can tell whose usage
 * was billed. Values are multiples of 1/128, exact in float32, so a base64 round trip is exact.
 */
export function mockVector(input: string | readonly number[], dimensions: number): number[] {
  const key = typeof input === "string" ? input : `tokens:${input.join(",")}`;
  const vector: number[] = [];
  for (let block = 0; vector.length < dimensions; block++) {
    const bytes = createHash("sha256").update(`${block}:${key}`).digest();
    for (const byte of bytes) {
      if (vector.length === dimensions) break;
      vector.push((byte - 128) / 128);
    }
  }
  return vector;
}

/** A provider's token count of one input: characters of a text, ids of a token array. */
export function mockTokens(input: string | readonly number[]): number {
  return input.length;
}

/** One recorded request, as the provider received it. */
export interface EmbeddingCall {
  url: URL;
  headers: Headers;
  body: any;
  raw: string;
}

/** A scripted failure: the next `times` requests for `model` get this answer. */
export interface MockFailure {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  times?: number;
}

export interface EmbeddingsMock {
  calls: EmbeddingCall[];
  /** The next requests for `model` (the upstream model id) fail as given. */
  fail(model: string, failure: MockFailure): void;
  reset(): void;
}

/** Records calls and hands out scripted failures, for one mock. */
export function recorder(): EmbeddingsMock & {
  record(request: Request, raw: string): any;
  failure(model: string): MockFailure | undefined;
} {
  const calls: EmbeddingCall[] = [];
  const failures = new Map<string, MockFailure>();
  return {
    calls,
    fail(model, failure) {
      failures.set(model, { times: 1, ...failure });
    },
    reset() {
      calls.length = 0;
      failures.clear();
    },
    record(request, raw) {
      let body: any;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      calls.push({ url: new URL(request.url), headers: request.headers, body, raw });
      return body;
    },
    failure(model) {
      const failure = failures.get(model);
      if (!failure) return undefined;
      if ((failure.times ?? 1) <= 1) failures.delete(model);
      else failure.times = (failure.times ?? 1) - 1;
      return failure;
    },
  };
}
