import { telemetryDomain } from "./deps.js";
import { telemetryMethods } from "./methods.js";

/** Telemetry events and their summaries, per tenant (docs/telemetry.md). */
export const telemetryModule = telemetryDomain.module({
  methods: telemetryMethods,
  init: ({ config, repos }) => ({ config, users: repos.users, tenants: repos.tenants, telemetry: repos.telemetry }),
});
