import { createHmac } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { DeliveryAttempt } from "../../storage/repos/webhooks.js";
import { guardedRequest } from "../outbound/guarded-fetch.js";
import { AddressRefused, type OutboundGuard } from "../outbound/outbound-guard.js";

/** Bytes of a receiver's answer kept on the attempt. */
export const SNIPPET_BYTES = 1024;

/**
 * One attempt's request, as the sender needs it: the delivery's id and exact body, the
 * subscription's URL and its signing secrets in plaintext (`whsec_…`; the current one, then a
 * rotated-out one still in its grace period). Plain data, so it can be posted to a thread.
 */
export interface SendJob {
  id: string;
  url: string;
  body: string;
  secrets: string[];
  timeoutMs: number;
}

/**
 * The Standard Webhooks signature `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` under the
 * base64 key after `whsec_`: what the `standardwebhooks` package's `Webhook.sign` computes
 * (test/rpc/webhooks/send.test.ts compares them), with node:crypto's HMAC instead of the
 * package's JavaScript SHA-256, a tenth of the cost per attempt. The id and the secret are
 * each delivery's own, so a signature cannot be shared between the deliveries of one event.
 */
export function signDelivery(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${timestampSeconds}.${body}`).digest("base64")}`;
}

/**
 * Makes one attempt through `guard` (the address rule on the address connected to, at
 * connection time: docs/webhooks.md "The address rule"): a signed POST of the body, an answer
 * within `timeoutMs`, redirects not followed, the first SNIPPET_BYTES of the answer kept.
 * Never throws: every failure is an attempt with `statusCode: null` and its reason. `closing`
 * cuts it (shutdown).
 */
export async function sendDelivery(guard: OutboundGuard, job: SendJob, closing: AbortSignal): Promise<DeliveryAttempt> {
  const started = Date.now();
  const at = new Date(started).toISOString();
  const timestamp = Math.floor(started / 1000);
  const signature = job.secrets.map((secret) => signDelivery(secret, job.id, timestamp, job.body)).join(" ");
  // One timer and one controller per attempt (AbortSignal.timeout and AbortSignal.any cost
  // several times more, per attempt, on the loop that sends).
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, job.timeoutMs);
  const onClosing = () => controller.abort();
  closing.addEventListener("abort", onClosing, { once: true });
  try {
    const res = await guardedRequest(guard, job.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "chat-agent-tool-gateway-webhooks",
        "webhook-id": job.id,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signature,
      },
      body: job.body,
      signal: controller.signal,
    });
    const response = await readSnippet(res, controller.signal);
    const status = res.statusCode ?? 502;
    const redirect = status >= 300 && status < 400;
    return {
      at,
      statusCode: status,
      durationMs: Date.now() - started,
      ...(redirect ? { error: `redirect to ${res.headers.location ?? "?"} not followed` } : {}),
      response,
    };
  } catch (error) {
    const reason = timedOut
      ? `no answer within ${job.timeoutMs / 1000} s (WEBHOOKS_TIMEOUT_SECONDS)`
      : closing.aborted
        ? "interrupted by shutdown"
        : describe(error);
    return { at, statusCode: null, durationMs: Date.now() - started, error: reason };
  } finally {
    clearTimeout(timer);
    closing.removeEventListener("abort", onClosing);
  }
}

/** The first SNIPPET_BYTES of the answer; the rest is never read (a huge body costs nothing). */
function readSnippet(res: IncomingMessage, signal: AbortSignal): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = () => {
      res.off("data", onData);
      res.off("end", finish);
      res.off("error", onError);
      signal.removeEventListener("abort", onAbort);
      // Not read to its end: the socket is not reused for another attempt.
      if (!res.complete) res.destroy();
      resolve(Buffer.concat(chunks).subarray(0, SNIPPET_BYTES).toString("utf8"));
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= SNIPPET_BYTES) finish();
    };
    const onError = (error: Error) => {
      signal.removeEventListener("abort", onAbort);
      res.destroy();
      reject(error);
    };
    const onAbort = () => onError(new Error("aborted"));
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    res.on("data", onData);
    res.once("end", finish);
    res.once("error", onError);
  });
}

function describe(error: unknown): string {
  if (error instanceof AddressRefused || (error as Error)?.name === "AddressRefused") return (error as Error).message;
  const cause = (error as { cause?: { code?: string } })?.cause;
  const code = (error as { code?: string })?.code ?? cause?.code;
  return code ? `connection failed (${code})` : `connection failed: ${(error as Error)?.message ?? String(error)}`;
}
