/**
 * Every collection that is listed, with the depths it is listed at (docs/storage.md
 * "Indexes"). A record `<name>:<p0>:<p1>:…` of a collection listed at depth `d` is a member
 * `<pd>:…` of the index `<name>:<p0>:…:<p(d-1)>` (depth 0: the index `<name>`, the whole
 * collection), written in the same atomic step as the record (storage/collection.ts). A
 * collection not named here is never listed: it is read by id only and keeps no index.
 */
export const LISTED: Readonly<Record<string, readonly number[]>> = {
  /** A user's gateway and account keys, a workspace's platform keys. */
  keys: [1],
  /** A tenant owner's agents (GET /agents, the tenant's agent count). */
  agents: [1],
  /** An agent's log lines, in sequence order. */
  "agent-logs": [1],
  /** The tenants a user created. */
  "tenant-owners": [1],
  /** A tenant's members, and the tenants of a user. */
  members: [1],
  "member-of": [1],
  /** A tenant's workspaces; every workspace, in id order (operators' overview). */
  "tenant-workspaces": [1],
  workspaces: [0],
  /** Every upstream MCP server (each instance connects them at start); a tenant's (its quota). */
  "mcp-servers": [0, 1],
  "model-registry": [0],
  /** Releases and rollouts, of every component and of one. */
  releases: [0, 1],
  rollouts: [0, 1],
  /** A user's tool plans. */
  "tool-plans": [1],
  /** A tenant's webhook subscriptions and deliveries. */
  "webhook-subs": [1],
  "webhook-deliveries": [1],
  /** A tenant's usage rollups, `<day>:<id>`, read by a range of days. */
  "usage-rollups": [1],
  /** A workspace's artifacts, in id (creation) order. */
  artifacts: [1],
  /** A tenant's telemetry hours (memory and fs; Redis keeps telemetry in sorted sets of its own). */
  telemetry: [1],
  /** A tenant's audit log, newest first (ids sort by inverted time, docs/audit.md). */
  audit: [1],
  /** Connected VMs on Redis: every connection, and a VM's connections. */
  vms: [0, 1],
};

/**
 * Queues: indexes ordered by a time, polled by score (`Indexes.upTo`), with no record of
 * their own beyond what they name.
 */
export const QUEUES = {
  /** Pending webhook deliveries `<tenantId>:<deliveryId>` by the time their next attempt is due. */
  webhookDue: "webhook-due",
  /** Webhook fan-outs still to run, `<eventId>`, by the time another instance may take them over. */
  webhookFanOuts: "webhook-fanouts",
} as const;
