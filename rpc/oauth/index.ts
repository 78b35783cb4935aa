import { pick } from "../module.js";
import { oauthDomain } from "./deps.js";
import { authorizationMethods } from "./authorization-methods.js";
import { consentMethods } from "./consent-methods.js";
import { clientMethods } from "./client-methods.js";
import { OAuthConsentsRepo } from "../../storage/repos/oauth-consents.js";
import { OAuthRecordsRepo } from "../../storage/repos/oauth-records.js";
import { grantMemoryMs } from "../credentials/oauth-tokens.js";

/**
 * The authorization server as users see it (docs/mcp.md "Authorization server"): the consent
 * page's reads and decisions, the consents they gave, and the clients operators register. The protocol itself (metadata,
 * registration, authorize, token, revocation) is a transport, bridge/oauth/.
 */
export const oauthModule = oauthDomain.module({
  methods: [...authorizationMethods, ...consentMethods, ...clientMethods],
  init: (ports) => ({
    ...pick(ports, ["config", "sink"]),
    ...pick(ports.repos, ["users", "tenants", "members", "agents"]),
    consents: new OAuthConsentsRepo(ports.store.atomic),
    records: new OAuthRecordsRepo(ports.store.atomic, ports.secrets, { grantMemoryMs: grantMemoryMs(ports.config) }),
    upstream: ports.use("bridge").upstream,
  }),
});
