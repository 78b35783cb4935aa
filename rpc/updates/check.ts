import { createHash } from "node:crypto";
import semver from "semver";
import type { Channel, Release, Rollout } from "../../storage/repos/releases.js";
import { inRollout } from "./rollout-bucket.js";
import { precedence, visibleChannels } from "./versions.js";

export interface CheckQuery {
  component: string;
  currentVersion: string;
  channel: Channel;
  clientId?: string;
}

/** The share of clients a release is offered to right now (no rollout: every client). */
export function effectivePercentage(rollout: Rollout | undefined, now = Date.now()): number {
  if (!rollout) return 100;
  if (rollout.state !== "active") return 0;
  if (rollout.startAt && Date.parse(rollout.startAt) > now) return 0;
  return rollout.percentage;
}

/**
 * Spec 9 / issue 12 "Check": the highest release on a channel the client sees whose rollout
 * includes the client. Mandatory when that release says so, or when the current version is
 * below the `minimumVersion` of any release the client is offered. Without a client id only
 * releases offered to every client count (a staged rollout cannot place an anonymous client).
 */
export function decideUpdate(query: CheckQuery, releases: readonly Release[], rollouts: ReadonlyMap<string, Rollout>, now = Date.now()) {
  const channels = visibleChannels(query.channel);
  const offered = releases.filter((release) => {
    if (!channels.has(release.channel) || !semver.gt(release.version, query.currentVersion)) return false;
    const percentage = effectivePercentage(rollouts.get(precedence(release.version)), now);
    if (query.clientId === undefined) return percentage >= 100;
    return inRollout(query.clientId, release.component, precedence(release.version), percentage);
  });
  const latest = offered.reduce<Release | undefined>(
    (best, release) => (!best || semver.gt(release.version, best.version) ? release : best),
    undefined,
  );
  const mandatory =
    latest !== undefined &&
    offered.some(
      (release) => release.mandatory || (release.minimumVersion !== undefined && semver.lt(query.currentVersion, release.minimumVersion)),
    );
  return {
    updateAvailable: latest !== undefined,
    current: query.currentVersion,
    channel: query.channel,
    latest: latest
      ? {
          version: latest.version,
          channel: latest.channel,
          url: latest.url,
          sha256: latest.sha256,
          size: latest.size,
          notes: latest.notes,
          mandatory,
          publishedAt: latest.publishedAt,
        }
      : null,
  };
}

/** A strong ETag over the answer: equal answers, equal tags, so a client's If-None-Match gets 304. */
export function etagOf(value: unknown): string {
  return `"${createHash("sha256").update(JSON.stringify(value)).digest("base64url").slice(0, 27)}"`;
}
