import { createHash } from "node:crypto";

/** Buckets per 100 %: percentages are honoured to a hundredth of a percent. */
const BUCKETS = 10_000;

/**
 * The client's bucket for one release, 0…9999: the first 32 bits of SHA-256 over client id,
 * component and version. The same client always lands in the same bucket for a release, and
 * buckets of different releases are independent, so a client is not always first or last.
 */
export function rolloutBucket(clientId: string, component: string, version: string): number {
  const digest = createHash("sha256").update(`${clientId}\u0000${component}\u0000${version}`).digest();
  return digest.readUInt32BE(0) % BUCKETS;
}

/**
 * True when the client is inside a rollout of `percentage` %: its bucket is below the
 * threshold, so raising the percentage only ever adds clients (issue 12 "Rollouts").
 */
export function inRollout(clientId: string, component: string, version: string, percentage: number): boolean {
  if (percentage >= 100) return true;
  if (percentage <= 0) return false;
  return rolloutBucket(clientId, component, version) < Math.round(percentage * (BUCKETS / 100));
}
