import { pick } from "../module.js";
import { tenantsDomain } from "./deps.js";
import { tenantMethods } from "./methods.js";
import { memberMethods } from "./member-methods.js";
import { auditMethods } from "./audit-methods.js";

/** Tenants, their members and roles (docs/tenants.md). */
export const tenantsModule = tenantsDomain.module({
  methods: [...tenantMethods, ...memberMethods, ...auditMethods],
  init: (ports) => ({
    ...pick(ports, ["config", "sink"]),
    ...pick(ports.repos, ["users", "tenants", "members", "agents", "audit"]),
    money: ports.use("money"),
  }),
});
