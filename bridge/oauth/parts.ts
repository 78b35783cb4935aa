import type { Config } from "../../rpc/config.js";
import { grantMemoryMs } from "../../rpc/credentials/oauth-tokens.js";
import { toGuardedFetch, type GuardedFetch } from "../../rpc/outbound/guarded-fetch.js";
import { OutboundGuard, type ResolveHost } from "../../rpc/outbound/outbound-guard.js";
import type { SecretBox } from "../../storage/secret-box.js";
import type { Store } from "../../storage/store.js";
import { OAuthConsentsRepo } from "../../storage/repos/oauth-consents.js";
import { OAuthKeysRepo } from "../../storage/repos/oauth-keys.js";
import { OAuthRecordsRepo } from "../../storage/repos/oauth-records.js";

/** What the authorization server keeps and reaches: its records, consents and keys in storage, and a guarded fetch. */
export interface OAuthParts {
  records: OAuthRecordsRepo;
  consents: OAuthConsentsRepo;
  keys: OAuthKeysRepo;
  /** Client ID Metadata Documents are fetched through the private-address rule (OAUTH_CLIENT_METADATA_ALLOW_PRIVATE). */
  fetch: GuardedFetch;
  close(): void;
}

export function openOAuthParts(infra: { config: Config; store: Store; secrets: SecretBox; resolveHost: ResolveHost }): OAuthParts {
  const { config, store, secrets } = infra;
  const guard = new OutboundGuard({
    allowPrivate: config.OAUTH_CLIENT_METADATA_ALLOW_PRIVATE,
    resolve: infra.resolveHost,
    hint: "this deployment does not fetch client metadata documents from private addresses",
  });
  return {
    records: new OAuthRecordsRepo(store.atomic, secrets, { grantMemoryMs: grantMemoryMs(config) }),
    consents: new OAuthConsentsRepo(store.atomic),
    keys: new OAuthKeysRepo(store.atomic, secrets),
    fetch: toGuardedFetch(guard),
    close: () => guard.close(),
  };
}
