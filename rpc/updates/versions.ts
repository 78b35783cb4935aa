import semver from "semver";
import * as v from "valibot";
import type { Channel } from "../../storage/repos/releases.js";

/**
 * Channel order (docs/updates.md): each channel sees its own releases and those of every more
 * stable channel, so a client on `beta` also gets newer `stable` releases, and `canary` sees all.
 */
export const CHANNELS = ["stable", "beta", "canary"] as const satisfies readonly Channel[];

export function visibleChannels(channel: Channel): Set<Channel> {
  return new Set(CHANNELS.slice(0, CHANNELS.indexOf(channel) + 1));
}

export const ChannelSchema = v.picklist(CHANNELS, "channel must be one of stable, beta, canary");

/** A SemVer 2.0 version, strictly (no `v` prefix, no loose forms); compared with `semver`, never as strings. */
export const Version = (field: string) =>
  v.pipe(
    v.string(`${field} must be a string`),
    v.maxLength(256, `${field} is too long`),
    v.check(
      (value) => semver.valid(value) !== null && /^\d/.test(value) && value === value.trim(),
      `${field} must be a SemVer 2.0 version such as 1.4.2 or 2.0.0-beta.1`,
    ),
  );

/** The identity of a release: its version without build metadata (SemVer 2.0 section 10). */
export function precedence(version: string): string {
  return semver.parse(version)!.version;
}

export const Component = v.pipe(
  v.string("component must be a string"),
  v.regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "component: lowercase letters, digits, . _ - (1-64 characters)"),
);
