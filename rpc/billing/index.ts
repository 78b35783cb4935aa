import { pick } from "../module.js";
import { billingDomain } from "./deps.js";
import { billingProxyMethods } from "./proxy.js";
import { usageMethods } from "./usage-methods.js";
import { creditMethods } from "./credit-methods.js";

/** Credits, usage reports and the billing proxy (docs/billing.md). */
export const billingModule = billingDomain.module({
  methods: [...usageMethods, ...creditMethods, ...billingProxyMethods],
  init: (ports) => ({
    ...pick(ports, ["config", "log"]),
    ...pick(ports.repos, ["users", "tenants", "members", "agents", "credits", "usage", "audit"]),
    money: ports.use("money"),
  }),
});
