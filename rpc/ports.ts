import type { Config } from "./config.js";
import type { EventSink } from "./event-sink.js";
import type { Logger } from "./log.js";
import type { Metrics } from "./metrics.js";
import type { Repos } from "./repos.js";
import type { KeyPrefixes } from "./credentials/api-keys.js";
import type { SessionTokens } from "./credentials/sessions.js";
import type { AccessTokenVerifier } from "./credentials/oauth-tokens.js";
import type { OAuthKeyRing } from "./credentials/oauth-keys.js";
import type { ResolveHost } from "./outbound/outbound-guard.js";
import type { Store } from "../storage/store.js";
import type { EventLog } from "../storage/events/event-log.js";
import type { SecretBox } from "../storage/secret-box.js";

/**
 * Ports a domain module exports to the domains above it in the module list (rpc/modules.ts),
 * by name. Each domain adds its own entry by declaration merging next to the port's type
 * (`declare module "../ports.js" { interface DomainExports { money: Money } }`), so the core
 * never names a domain (docs/architecture.md "Domain modules").
 */
// biome-ignore lint/suspicious/noEmptyInterface: each domain extends it by declaration merging
export interface DomainExports {}

/** What the core hands every domain module's `init`; a module takes the ports it names. */
export interface Ports {
  readonly config: Config;
  readonly log: Logger;
  /** Prometheus metrics of this service (GET /metrics). */
  readonly metrics: Metrics;
  /** Raw storage, for the few modules that need more than a repository. */
  readonly store: Store;
  /** Storage repositories over `store`, one instance each, built when first named. */
  readonly repos: Repos;
  /** Encrypts secrets at rest (DATA_ENCRYPTION_SECRET). */
  readonly secrets: SecretBox;
  /** Name resolution for every outbound connection the address rule guards (rpc/outbound). */
  readonly resolveHost: ResolveHost;
  /** The event bus as stored (docs/events.md): Redis Streams on Redis, in process on memory and fs. */
  readonly eventLog: EventLog;
  /** Publishes events on the bus and tells the listeners (webhooks) of each (rpc/event-sink.ts). */
  readonly sink: EventSink;
  readonly sessions: SessionTokens;
  /** The authorization server's signing keys, rotated and shared by every instance (docs/mcp.md "Signing keys"). */
  readonly oauthKeys: OAuthKeyRing;
  /** Verifies the authorization server's access tokens on the MCP endpoints (docs/mcp.md). */
  readonly accessTokens: AccessTokenVerifier;
  readonly keyPrefixes: KeyPrefixes;
  /** A port an earlier domain exported (throws when no earlier domain did: the module order is wrong). */
  use<K extends keyof DomainExports>(name: K): DomainExports[K];
  /** Registers cleanup to run on shutdown, last registered first. */
  onClose(fn: () => Promise<void> | void): void;
}

/**
 * What the dispatcher, its policies and the transports read of the core: authentication's
 * repositories and credentials, the members a tenant's budget reads, storage for limiters, the
 * log, the metrics, shutdown hooks.
 */
export type CorePorts = Pick<
  Ports,
  "config" | "log" | "metrics" | "store" | "sessions" | "oauthKeys" | "accessTokens" | "keyPrefixes" | "onClose"
> &
  Pick<Repos, "users" | "keys" | "tenants" | "members">;
