import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";

/** What the telemetry domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type TelemetryDeps = Pick<Repos, "users" | "tenants" | "telemetry"> & Pick<Ports, "config">;

export const telemetryDomain = domain<TelemetryDeps>("telemetry");

/** The call context of a telemetry handler or helper. */
export type TelemetryContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, TelemetryDeps>;
