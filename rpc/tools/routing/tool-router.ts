import { toolScope, type ToolDef, type ToolScope } from "../types.js";
import type { ToolCatalog, VmDirectory, VmPresence } from "../ports.js";

import { buildIndex, rank, type Ranked, type RoutableTool, type ToolIndex } from "./ranker.js";
import type { PatternLists } from "../../allow-list.js";
import { NAMESPACE_SEPARATOR, catalogName } from "../sources.js";

/** Who is asking: upstream servers and VMs are routable only within their tenant (shared servers and built-ins by everyone). */
export interface RouteScope {
  tenantId: string | undefined;
  /** The caller's tool allow-lists (docs/access-control.md): a tool they do not allow is not routable. */
  allowed?: PatternLists;
}

export interface RouteOptions {
  /** A server (`builtin`, an upstream name, `vm:<id>`) that wins when it has any match. */
  preferredMcp?: string;
  /** Only tools of this server take part (e.g. `vm:<id>` when a VM is named). */
  onlyServer?: string;
  /** Alternatives returned besides the best (default 4). */
  alternatives?: number;
}

export interface RouteResult {
  best: Ranked | undefined;
  alternatives: Ranked[];
  /** Why the best is the best, in words. */
  reason: string;
}

/** Views the index is cached for; one per tenant that asked recently. */
const MAX_CACHED_VIEWS = 256;

/** The server label of a catalog tool, and its name on that server. */
function locate(tool: ToolDef, vmOf: Map<string, VmPresence>): { server: string; localName: string; tenantId?: string } {
  if (tool.source.kind === "builtin") return { server: "builtin", localName: tool.name };
  if (tool.source.kind === "mcp") {
    const server = tool.source.server ?? tool.source.id.replace(/^mcp:/, "");
    const prefix = server + NAMESPACE_SEPARATOR;
    return { server, localName: tool.name.startsWith(prefix) ? tool.name.slice(prefix.length) : tool.name };
  }
  const record = vmOf.get(tool.name);
  // Listed by the catalog but gone from the directory a moment later: not routable.
  if (!record) return { server: "vm", localName: tool.name, tenantId: "" };
  return { server: `vm:${record.vmId}`, localName: tool.name.slice(catalogName(record.vmId, "").length), tenantId: record.tenantId };
}

interface Located extends RoutableTool {
  tenantId?: string;
}

/**
 * Routes a request in words to a catalog tool. Keeps a BM25 index (rpc/tools/routing/ranker.ts)
 * of the tools each tenant can see, dropped whenever the catalog changes (a VM connects,
 * registers or leaves; an upstream server's tools change), rebuilt on the next request.
 */
export class ToolRouter {
  readonly #catalog: ToolCatalog;
  readonly #vms: VmDirectory;
  readonly #views = new Map<string, Promise<ToolIndex>>();
  #generation = 0;
  readonly #unsubscribe: () => void;

  constructor(catalog: ToolCatalog, vms: VmDirectory) {
    this.#catalog = catalog;
    this.#vms = vms;
    this.#unsubscribe = catalog.onChange(() => {
      this.#generation += 1;
      this.#views.clear();
    });
  }

  close(): void {
    this.#unsubscribe();
    this.#views.clear();
  }

  /** Index rebuilds so far (a catalog change counts once, whatever it touched). */
  get generation(): number {
    return this.#generation;
  }

  async #all(scope: RouteScope): Promise<Located[]> {
    // The catalog leaves out other tenants' upstream servers and VMs; names are unique within a scope.
    const [tools, vms] = await Promise.all([
      this.#catalog.list({ scope: withAllowed(toolScope(scope.tenantId), scope.allowed) }),
      this.#vms.list(),
    ]);
    const vmOf = new Map<string, VmPresence>();
    for (const record of vms) for (const tool of record.tools) vmOf.set(catalogName(record.vmId, tool.name), record);
    return tools.map((tool) => {
      const where = locate(tool, vmOf);
      return {
        server: where.server,
        name: tool.name,
        localName: where.localName,
        description: tool.description,
        category: tool.category,
        inputSchema: tool.inputSchema,
        ...(where.tenantId !== undefined ? { tenantId: where.tenantId } : {}),
      };
    });
  }

  /** The tools a scope may route to, with their server. */
  async tools(scope: RouteScope): Promise<RoutableTool[]> {
    return (await this.#index(scope)).docs.map((doc) => doc.tool);
  }

  #index(scope: RouteScope): Promise<ToolIndex> {
    // One view per tenant and set of allow-lists: callers with other lists never share one.
    const key = `${scope.tenantId ?? ""}\u0000${scope.allowed?.length ? JSON.stringify(scope.allowed) : ""}`;
    let view = this.#views.get(key);
    if (!view) {
      const generation = this.#generation;
      view = this.#all(scope).then((tools) =>
        buildIndex(
          tools
            // VM tools belong to their tenant (checked again against the directory's presence records).
            .filter((tool) => tool.tenantId === undefined || (tool.tenantId !== "" && tool.tenantId === scope.tenantId))
            .map(({ tenantId: _tenant, ...tool }) => tool),
        ),
      );
      view.catch(() => this.#views.delete(key));
      // A change while building: serve this one, but do not keep it.
      if (generation === this.#generation) {
        if (this.#views.size >= MAX_CACHED_VIEWS) this.#views.delete(this.#views.keys().next().value!);
        this.#views.set(key, view);
      }
    }
    return view;
  }

  /** Every matching tool of the scope, best first. */
  async rank(input: string, scope: RouteScope, options: Pick<RouteOptions, "onlyServer"> & { limit?: number } = {}): Promise<Ranked[]> {
    const index = await this.#index(scope);
    const only = options.onlyServer;
    return rank(index, input, { filter: only ? (tool) => tool.server === only : undefined, limit: options.limit });
  }

  /**
   * The best tool for `input` and the runners-up. `preferredMcp` wins when that server has
   * any tool scoring above zero, even if another server's tool scores higher.
   */
  async route(input: string, scope: RouteScope, options: RouteOptions = {}): Promise<RouteResult> {
    const ranked = await this.rank(input, scope, { onlyServer: options.onlyServer });
    const alternativesWanted = options.alternatives ?? 4;
    if (ranked.length === 0) {
      return {
        best: undefined,
        alternatives: [],
        reason: options.onlyServer ? `No tool of ${options.onlyServer} matches the request` : "No tool matches the request",
      };
    }
    const preferred = options.preferredMcp ? matchServer(options.preferredMcp, ranked) : undefined;
    const best = preferred ?? ranked[0]!;
    const alternatives = ranked.filter((entry) => entry !== best).slice(0, alternativesWanted);
    const terms = best.matched.slice(0, 5).join(", ");
    let reason = `Best match on ${terms} (BM25 ${best.score})`;
    if (preferred && preferred !== ranked[0])
      reason = `Preferred server ${best.tool.server} has a match on ${terms} (BM25 ${best.score}); it wins over ${ranked[0]!.tool.server}/${ranked[0]!.tool.name} (${ranked[0]!.score})`;
    else if (preferred) reason += `; on the preferred server`;
    else if (options.preferredMcp) reason += `; the preferred server ${options.preferredMcp} has no matching tool`;
    return { best, alternatives, reason };
  }
}

/** `preferredMcp` names a server exactly, or a VM by its id (`vm:<id>` or `<id>`). */
function matchServer(preferred: string, ranked: Ranked[]): Ranked | undefined {
  return ranked.find((entry) => entry.tool.server === preferred) ?? ranked.find((entry) => entry.tool.server === `vm:${preferred}`);
}

/** A tenant's catalog scope narrowed by allow-lists (the internal services' scope is never narrowed). */
function withAllowed(scope: ToolScope, allowed: PatternLists | undefined): ToolScope {
  return "tenantId" in scope && allowed?.length ? { ...scope, allowed } : scope;
}

const routers = new WeakMap<ToolCatalog, ToolRouter>();

/** The router of a catalog, made on first use and kept as long as the catalog. */
export function routerFor(deps: { catalog: ToolCatalog; vms: VmDirectory; onClose?(fn: () => void): void }): ToolRouter {
  let router = routers.get(deps.catalog);
  if (!router) {
    router = new ToolRouter(deps.catalog, deps.vms);
    routers.set(deps.catalog, router);
    const made = router;
    deps.onClose?.(() => made.close());
  }
  return router;
}
