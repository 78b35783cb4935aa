import { pick } from "../module.js";
import { keysDomain } from "./deps.js";
import { gatewayKeyMethods } from "./gateway-keys.js";
import { consoleKeyMethods } from "./console-keys.js";
import { accountKeyMethods } from "./account-keys.js";
import { operatorKeyMethods } from "./operator-methods.js";

/** API keys of the Platform, Account and Gateway APIs and the console. */
export const keysModule = keysDomain.module({
  methods: [...gatewayKeyMethods, ...consoleKeyMethods, ...accountKeyMethods, ...operatorKeyMethods],
  init: (ports) => ({
    ...pick(ports, ["config", "keyPrefixes", "sink"]),
    ...pick(ports.repos, ["users", "tenants", "members", "agents", "keys", "quotas", "audit"]),
  }),
});
