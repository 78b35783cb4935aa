import type { Logger } from "../../rpc/log.js";

export type OidcModule = typeof import("oidc-provider");

let loaded: Promise<OidcModule> | undefined;

/**
 * oidc-provider, imported when the authorization server first serves. It writes its notices
 * with console.warn/info (for instance "Unsupported runtime" on Node 20, which it runs on but
 * its maintainer no longer supports: docs/mcp.md "Why oidc-provider"); while it loads they go to
 * the service's log as JSON lines instead, like everything else the service writes.
 */
export function loadOidcProvider(log: Logger): Promise<OidcModule> {
  loaded ??= (async () => {
    const { warn, info } = console;
    const toLog = (...args: unknown[]) => log.warn({ event: "oauth.library_notice", message: args.map(String).join(" ") });
    console.warn = toLog;
    console.info = toLog;
    try {
      return await import("oidc-provider");
    } finally {
      console.warn = warn;
      console.info = info;
    }
  })();
  return loaded;
}
