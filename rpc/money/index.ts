import { domain } from "../module.js";
import { Allowance, loadPlans } from "./allowance.js";
import { Money, type MoneyDeps } from "./money.js";

/** The money domain: no methods of its own; it offers `Money` to chat, agents, tenants and billing. */
export const moneyModule = domain<MoneyDeps>("money").module({
  methods: [],
  check: (config) => void loadPlans(config),
  init: ({ config, log, repos }) => ({
    config,
    log,
    ledger: repos.ledger,
    credits: repos.credits,
    usage: repos.usage,
    users: repos.users,
    tenants: repos.tenants,
    allowance: new Allowance(loadPlans(config), repos.ledger),
  }),
  provides: (deps) => ({ money: new Money(deps) }),
});
