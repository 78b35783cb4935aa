import type { Store } from "../store.js";
import { LocalTelemetry } from "./telemetry-local.js";
import { RedisTelemetry } from "./telemetry-redis.js";
import type { TelemetryStore } from "./telemetry-model.js";

export function openTelemetry(store: Store, retentionDays: number): TelemetryStore {
  if (store.driver === "redis" && store.duplicateRedis)
    return new RedisTelemetry(store.duplicateRedis("telemetry"), store.prefix ?? "gw", retentionDays);
  return new LocalTelemetry(store, retentionDays);
}
