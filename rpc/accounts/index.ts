import { pick } from "../module.js";
import { accountsDomain } from "./deps.js";
import { authMethods } from "./methods.js";
import { consoleSessionMethods } from "./console-session.js";
import { LoginThrottle } from "./login-throttle.js";
import { operatorUserMethods } from "./operator-methods.js";

/** Accounts: registration, sign-in, sessions (docs/console.md). */
export const accountsModule = accountsDomain.module({
  methods: [...authMethods, ...consoleSessionMethods, ...operatorUserMethods],
  init: (ports) => ({
    ...pick(ports, ["config", "log", "sessions", "sink", "store"]),
    ...pick(ports.repos, ["users", "tenants", "members", "agents"]),
    loginThrottle: new LoginThrottle(ports.store, ports.config),
  }),
});
