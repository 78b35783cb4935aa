import type { OpenToolBridge } from "../rpc/tools/ports.js";
import { Catalog } from "./catalog.js";
import { BuiltinSource } from "./builtin/source.js";
import { UpstreamServers } from "./upstream/registry.js";
import { VmHub } from "./vm/hub.js";
import { openOAuthParts, type OAuthParts } from "./oauth/parts.js";
import type { SecretBox } from "../storage/secret-box.js";

/** The concrete tool bridge: one catalog fed by the built-ins, upstream MCP servers and VM agents. */
export interface ToolBridge {
  catalog: Catalog;
  vms: VmHub;
  upstream: UpstreamServers;
  /** The authorization server's storage and outbound fetch (bridge/oauth/). */
  oauth: OAuthParts;
  /** Encrypts secrets at rest and seals MCP session ids (DATA_ENCRYPTION_SECRET). */
  secrets: SecretBox;
  close(): Promise<void>;
}

/**
 * Opens the bridge over the service's storage. Returns a function for `compose` (rpc/compose.ts) and
 * a getter for the concrete parts, which the bridge's own transports (MCP endpoint, sockets) use.
 */
export function defineToolBridge(): { open: OpenToolBridge; get(): ToolBridge } {
  let bridge: ToolBridge | undefined;
  return {
    async open({ config, log, store, secrets, resolveHost, emit, metrics }) {
      const catalog = new Catalog({ counted: metrics });
      const vms = new VmHub({ config, log, store, catalog, emit });
      await vms.start();
      catalog.addSource(new BuiltinSource({ resolveHost }));
      const upstream = new UpstreamServers({ config, log, store, secrets, catalog, resolveHost, emit });
      try {
        await upstream.start();
      } catch (error) {
        await vms.close();
        throw error;
      }
      const oauth = openOAuthParts({ config, store, secrets, resolveHost });
      bridge = {
        catalog,
        vms,
        upstream,
        oauth,
        secrets,
        async close() {
          await upstream.close();
          await vms.close();
          oauth.close();
        },
      };
      return bridge;
    },
    get() {
      if (!bridge) throw new Error("The tool bridge is not open yet");
      return bridge;
    },
  };
}
