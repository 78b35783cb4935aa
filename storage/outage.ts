/**
 * Whether an error means storage cannot serve right now (docs/storage.md "When Redis is down or
 * full"), as opposed to a fault of the service: Redis unreachable (ioredis gave up retrying, or
 * the connection closed), Redis refusing writes (past maxmemory with noeviction, a read-only
 * replica, loading its data, a failed snapshot with stop-writes-on-bgsave-error), or the fs
 * journal refusing writes after a failed write, or Redis not answering within STORAGE_TIMEOUT_MS
 * (ioredis's commandTimeout: "Command timed out"). Callers answer 503 for these, never 500.
 * Returns a short reason for the log, or undefined.
 */
const REFUSALS = /^(OOM|LOADING|READONLY|MISCONF|MASTERDOWN|NOREPLICAS|BUSY|CLUSTERDOWN|TRYAGAIN)\b/;
const UNREACHABLE =
  /^(Command timed out|Connection is closed|Stream isn't writeable|Reached the max retries per request limit|The fs storage (stopped accepting writes|is closed))/;

export function storageOutage(error: unknown, depth = 0): string | undefined {
  if (!(error instanceof Error) || depth > 3) return undefined;
  const { name, message } = error;
  if (name === "MaxRetriesPerRequestError" || UNREACHABLE.test(message)) return message;
  if (name === "ReplyError" && REFUSALS.test(message)) return message;
  // A transaction (MULTI) refused as a whole: the refusal is among the errors of its commands.
  const previous = (error as { previousErrors?: unknown[] }).previousErrors;
  if (name === "ReplyError" && message.startsWith("EXECABORT") && previous) {
    for (const inner of previous) {
      const reason = storageOutage(inner, depth + 1);
      if (reason) return reason;
    }
  }
  return storageOutage((error as { cause?: unknown }).cause, depth + 1);
}
