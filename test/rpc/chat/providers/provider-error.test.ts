import { describe, expect, it } from "vitest";
import { ServiceError } from "../../../../rpc/errors.js";
import {
  ProviderError,
  isRetryableStatus,
  messageOf,
  retryAfterOf,
  retryDelayOf,
  retryInfo,
} from "../../../../rpc/chat/providers/provider-error.js";

/** The retry facts every adapter attaches to its errors (docs/providers.md "Errors and retries"). */
describe("provider errors", () => {
  it("call 408, 429 and every 5xx retryable, and the request's own 4xx not", () => {
    for (const status of [408, 429, 500, 502, 503, 504, 529]) expect(isRetryableStatus(status), `${status}`).toBe(true);
    for (const status of [400, 401, 403, 404, 409, 413, 422]) expect(isRetryableStatus(status), `${status}`).toBe(false);
  });

  it("read the wait from retry-after-ms, Retry-After in seconds or as a date, or Gemini's RetryInfo", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(retryAfterOf({ "retry-after-ms": "250", "retry-after": "9" }, now)).toBe(250);
    expect(retryAfterOf({ "retry-after": "2" }, now)).toBe(2000);
    expect(retryAfterOf({ "retry-after": "0.5" }, now)).toBe(500);
    expect(retryAfterOf({ "retry-after": "Thu, 01 Jan 2026 00:00:30 GMT" }, now)).toBe(30_000);
    expect(retryAfterOf({ "retry-after": "Wed, 31 Dec 2025 00:00:00 GMT" }, now)).toBe(0);
    expect(retryAfterOf({ "retry-after": "soon" }, now)).toBeUndefined();
    expect(retryAfterOf({}, now)).toBeUndefined();
    expect(retryDelayOf({ error: { details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "1.5s" }] } })).toBe(1500);
    expect(retryDelayOf({ error: { details: [] } })).toBeUndefined();
  });

  it("find the message in each provider's error body", () => {
    expect(messageOf({ error: { message: "openai, anthropic and gemini" } }, 400)).toBe("openai, anthropic and gemini");
    expect(messageOf({ message: "bedrock" }, 400)).toBe("bedrock");
    expect(messageOf({ detail: "a detail body" }, 400)).toBe("a detail body");
    expect(messageOf({}, 418)).toBe("HTTP 418");
  });

  it("summarise any thrown value for a caller deciding on another attempt", () => {
    const relayed = new ProviderError("UPSTREAM", "slow down", {
      status: 429,
      upstreamStatus: 429,
      retryable: true,
      retryAfterMs: 1000,
      upstreamBody: {},
    });
    expect(relayed).toBeInstanceOf(ServiceError);
    expect(retryInfo(relayed)).toEqual({ retryable: true, retryAfterMs: 1000, upstreamStatus: 429 });
    expect(retryInfo(new ProviderError("TIMEOUT", "no answer", { retryable: true }))).toEqual({ retryable: true });
    expect(retryInfo(new ServiceError("BAD_GATEWAY", "cut mid-stream"))).toEqual({ retryable: false });
    expect(retryInfo(new Error("bug"))).toEqual({ retryable: false });
  });
});
