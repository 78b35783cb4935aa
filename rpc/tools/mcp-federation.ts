import type { Principal } from "../auth.js";
import { ServiceError } from "../errors.js";
import type { McpCompleteParams, McpObject, McpOffers, UpstreamServerHandle, VmPresence } from "./ports.js";
import type { ToolScope } from "./types.js";
import { NAMESPACE_SEPARATOR } from "./sources.js";
import { scopeOfPrincipal } from "./visible-tools.js";
import type { ToolsDeps } from "./deps.js";

/**
 * Resources and prompts of upstream MCP servers, federated into the bridge's MCP endpoint
 * (docs/mcp.md "Resources and prompts"), and one server's view for its own endpoint
 * (`/bridge/mcp/servers/{name}/`). Names are namespaced reversibly, like tools:
 *
 * - a prompt `<name>` of server `s` is `s__<name>` (server names have no `_`);
 * - a resource URI (or template) `<uri>` of server `s` is `s+<uri>`: the server's name joined
 *   to the URI's scheme with `+` (`everything+demo://resource/1`); server names have no `+`,
 *   so the first `+` splits it back. `_meta.server` and `_meta.uri` carry both parts too.
 *
 * On a server's own endpoint (`server` given) names and URIs are the server's own.
 *
 * Connected VM agents that announced resources or prompts are federated too, for their owning
 * tenant only: `vm+<vmId>+<uri>` and `vm__<vmId>__<prompt>` (`vm` is a reserved server name;
 * vmIds have no `+`; a prompt name is split at each `__` until a VM and prompt match, like
 * VM tools), `_meta.vm` naming the VM.
 */

const SERVER_NAME = /^[A-Za-z0-9-]{1,48}$/;

export function namespacedUri(server: string, uri: string): string {
  return `${server}+${uri}`;
}

/** `s+<uri>` back to its server and URI; undefined when it is not in that form. */
export function splitUri(uri: string): { server: string; uri: string } | undefined {
  const plus = uri.indexOf("+");
  if (plus < 1) return undefined;
  const server = uri.slice(0, plus);
  return SERVER_NAME.test(server) ? { server, uri: uri.slice(plus + 1) } : undefined;
}

function splitName(name: string): { server: string; name: string } | undefined {
  const at = name.indexOf(NAMESPACE_SEPARATOR);
  if (at < 1) return undefined;
  const server = name.slice(0, at);
  return SERVER_NAME.test(server) ? { server, name: name.slice(at + NAMESPACE_SEPARATOR.length) } : undefined;
}

export interface FederationCall {
  principal: Principal;
  /** A server's own endpoint: only that server, names as the server has them. */
  server?: string;
  signal?: AbortSignal;
}

/** The servers a call federates: the one named (NOT_FOUND when the caller does not see it), or every one the caller sees. */
async function sourcesOf(deps: ToolsDeps, call: FederationCall): Promise<UpstreamServerHandle[]> {
  const scope = await scopeOfPrincipal(deps, call.principal);
  if (call.server === undefined) return [...deps.upstream.visible(scope), ...(await vmSources(deps, scope))];
  const handle = deps.upstream.find(scope, call.server);
  if (!handle) throw new ServiceError("NOT_FOUND", `No MCP server named ${call.server}`);
  return [handle];
}

/** Admission of a server's own endpoint: the caller's tenant owns it, or it is shared; anything else is the same 404. */
export async function requireVisibleServer(deps: ToolsDeps, principal: Principal, server: string): Promise<void> {
  await sourcesOf(deps, { principal, server });
}

/** The VMs of the caller's tenant that announced resources or prompts (never another tenant's; internal services see none). */
async function vmSources(deps: ToolsDeps, scope: ToolScope): Promise<UpstreamServerHandle[]> {
  if (!("tenantId" in scope)) return [];
  const records = await deps.vms.list();
  return records
    .filter((record) => record.tenantId === scope.tenantId && (record.resources?.length || record.prompts?.length))
    .sort((a, b) => a.vmId.localeCompare(b.vmId))
    .map((record) => vmSource(deps, record));
}

const notFound = (what: string) => new ServiceError("NOT_FOUND", what);

/** A VM as a federated source: its announced lists, `resources/read` and `prompts/get` asked of the VM. */
function vmSource(deps: ToolsDeps, record: VmPresence): UpstreamServerHandle {
  const resources = record.resources ?? [];
  const prompts = record.prompts ?? [];
  return {
    name: vmSourceName(record.vmId),
    tenantId: record.tenantId,
    namespace: {
      uri: namespacedUri(vmSourceName(record.vmId), ""),
      prompt: `${VM_NAMESPACE}${NAMESPACE_SEPARATOR}${record.vmId}${NAMESPACE_SEPARATOR}`,
      meta: { vm: record.vmId },
    },
    offers: () => ({ resources: resources.length > 0, prompts: prompts.length > 0, subscribe: false, completions: false }),
    listResources: async () => resources.map((resource) => ({ ...resource })),
    listResourceTemplates: async () => [],
    listPrompts: async () => prompts.map((prompt) => ({ ...prompt })),
    // Only what the VM announced is asked of it.
    readResource: async (uri, options) => {
      if (!resources.some((resource) => resource.uri === uri)) throw notFound(`Unknown resource: ${uri}`);
      return deps.vms.ask(record.vmId, "resources/read", { uri }, options);
    },
    getPrompt: async (name, args, options) => {
      if (!prompts.some((prompt) => prompt.name === name)) throw notFound(`Unknown prompt: ${name}`);
      return deps.vms.ask(record.vmId, "prompts/get", { name, arguments: args }, options);
    },
    subscribe: async (uri) => {
      throw notFound(`Unknown resource: ${uri}`);
    },
    unsubscribe: async () => undefined,
    complete: async () => {
      throw notFound("VM agents offer no completions");
    },
  };
}

/** How a source's items are named on the catalog endpoint. */
const uriPrefix = (source: UpstreamServerHandle) => source.namespace?.uri ?? namespacedUri(source.name, "");
const promptPrefix = (source: UpstreamServerHandle) => source.namespace?.prompt ?? `${source.name}${NAMESPACE_SEPARATOR}`;
const metaOf = (source: UpstreamServerHandle) => source.namespace?.meta ?? { server: source.name };

const bounds = (deps: ToolsDeps, signal?: AbortSignal) => ({
  timeoutMs: deps.config.GATEWAY_TIMEOUT_SECONDS * 1000,
  ...(signal ? { signal } : {}),
});

/** What the sources offer, for the capabilities an MCP server declares at initialize. */
export async function federatedCapabilities(deps: ToolsDeps, call: FederationCall): Promise<McpOffers> {
  const offers = (await sourcesOf(deps, call)).map((source) => source.offers());
  const some = (key: keyof McpOffers) => offers.some((offer) => offer[key]);
  return { resources: some("resources"), prompts: some("prompts"), subscribe: some("subscribe"), completions: some("completions") };
}

type Lister = (source: UpstreamServerHandle) => Promise<McpObject[]>;

/** Every source's list, each item renamed for the caller; a source that fails lists nothing (like the tool catalog). */
async function collect(
  deps: ToolsDeps,
  call: FederationCall,
  list: Lister,
  rename: (source: UpstreamServerHandle, item: McpObject) => McpObject,
): Promise<McpObject[]> {
  const sources = await sourcesOf(deps, call);
  const lists = await Promise.all(sources.map((source) => list(source).catch(() => [] as McpObject[])));
  return lists.flatMap((items, index) => (call.server === undefined ? items.map((item) => rename(sources[index]!, item)) : items));
}

const withMeta = (item: McpObject, meta: Record<string, unknown>): McpObject => ({
  ...item,
  _meta: { ...((item._meta as Record<string, unknown> | undefined) ?? {}), ...meta },
});

export function listResources(deps: ToolsDeps, call: FederationCall): Promise<McpObject[]> {
  return collect(
    deps,
    call,
    (source) => source.listResources(bounds(deps, call.signal)),
    (source, item) => withMeta({ ...item, uri: uriPrefix(source) + String(item.uri) }, { ...metaOf(source), uri: item.uri }),
  );
}

export function listResourceTemplates(deps: ToolsDeps, call: FederationCall): Promise<McpObject[]> {
  return collect(
    deps,
    call,
    (source) => source.listResourceTemplates(bounds(deps, call.signal)),
    (source, item) =>
      withMeta(
        { ...item, uriTemplate: uriPrefix(source) + String(item.uriTemplate) },
        { ...metaOf(source), uriTemplate: item.uriTemplate },
      ),
  );
}

export function listPrompts(deps: ToolsDeps, call: FederationCall): Promise<McpObject[]> {
  return collect(
    deps,
    call,
    (source) => source.listPrompts(bounds(deps, call.signal)),
    (source, item) => withMeta({ ...item, name: promptPrefix(source) + String(item.name) }, { ...metaOf(source), name: item.name }),
  );
}

/** The source of a namespaced name or URI, resolved only among the servers the caller sees. */
async function resolve(
  deps: ToolsDeps,
  call: FederationCall,
  parsed: { server: string } | undefined,
  unknown: ServiceError,
): Promise<UpstreamServerHandle> {
  if (call.server !== undefined) return (await sourcesOf(deps, call))[0]!;
  if (!parsed) throw unknown;
  const handle = deps.upstream.find(await scopeOfPrincipal(deps, call.principal), parsed.server);
  if (!handle) throw unknown;
  return handle;
}

/** A namespaced resource URI's source and the source's own URI (a VM's `vm+<vmId>+<uri>` included). */
async function locateUri(
  deps: ToolsDeps,
  call: FederationCall,
  uri: string,
  unknown: ServiceError,
): Promise<{ source: UpstreamServerHandle; own: string }> {
  const parsed = call.server === undefined ? splitUri(uri) : { server: call.server, uri };
  if (call.server === undefined && parsed?.server === VM_NAMESPACE) {
    const plus = parsed.uri.indexOf("+");
    const vmId = parsed.uri.slice(0, plus);
    const source =
      plus > 0
        ? (await vmSources(deps, await scopeOfPrincipal(deps, call.principal))).find((vm) => vm.name === vmSourceName(vmId))
        : undefined;
    if (!source) throw unknown;
    return { source, own: parsed.uri.slice(plus + 1) };
  }
  return { source: await resolve(deps, call, parsed, unknown), own: parsed!.uri };
}

/** A namespaced prompt name's source and the source's own name (a VM's `vm__<vmId>__<prompt>` included). */
async function locatePrompt(
  deps: ToolsDeps,
  call: FederationCall,
  name: string,
  unknown: ServiceError,
): Promise<{ source: UpstreamServerHandle; own: string }> {
  const parsed = call.server === undefined ? splitName(name) : { server: call.server, name };
  if (call.server === undefined && parsed?.server === VM_NAMESPACE) {
    // vmIds may hold `__`: each split point is tried against the caller's VMs' prompts.
    const vms = await vmSources(deps, await scopeOfPrincipal(deps, call.principal));
    for (const source of vms) {
      const prefix = promptPrefix(source);
      if (!name.startsWith(prefix)) continue;
      const own = name.slice(prefix.length);
      if ((await source.listPrompts(bounds(deps))).some((prompt) => prompt.name === own)) return { source, own };
    }
    throw unknown;
  }
  return { source: await resolve(deps, call, parsed, unknown), own: parsed!.name };
}

/** The server name under which VM agents' resources and prompts are namespaced (reserved for upstream servers). */
const VM_NAMESPACE = "vm";
/** A VM's name as a federated source: `vm+<vmId>`, so its URIs read `vm+<vmId>+<uri>`. */
const vmSourceName = (vmId: string) => namespacedUri(VM_NAMESPACE, vmId);

/** Renames the URIs of embedded resources and resource links in contents and prompt messages. */
function renameContent(prefix: string, content: McpObject): McpObject {
  if (content.type === "resource_link" && typeof content.uri === "string") return { ...content, uri: prefix + content.uri };
  if (content.type === "resource" && content.resource && typeof (content.resource as McpObject).uri === "string") {
    const resource = content.resource as McpObject;
    return { ...content, resource: { ...resource, uri: prefix + String(resource.uri) } };
  }
  return content;
}

export async function readResource(deps: ToolsDeps, call: FederationCall, uri: string): Promise<McpObject> {
  const unknown = new ServiceError("NOT_FOUND", `Unknown resource: ${uri}`, { details: { uri } });
  const { source, own } = await locateUri(deps, call, uri, unknown);
  if (!source.offers().resources) throw unknown;
  const result = await source.readResource(own, bounds(deps, call.signal)).catch((error: unknown) => {
    // A URI the source does not have is the same answer as an unknown one.
    throw error instanceof ServiceError && error.code === "NOT_FOUND" ? unknown : error;
  });
  if (call.server !== undefined) return result;
  const contents = ((result.contents as McpObject[] | undefined) ?? []).map((content) =>
    typeof content.uri === "string" ? { ...content, uri: uriPrefix(source) + content.uri } : content,
  );
  return { ...result, contents };
}

/**
 * `resources/subscribe` of a namespaced URI for one MCP session: relayed to its server (once per
 * URI), whose `notifications/resources/updated` then reach that session, renamed. An unknown URI
 * (or one of a server the caller does not see) is NOT_FOUND, like resources/read.
 */
export async function subscribe(
  deps: ToolsDeps,
  call: FederationCall,
  uri: string,
  subscriber: string,
  subscribing: boolean,
): Promise<Record<string, never>> {
  const unknown = new ServiceError("NOT_FOUND", `Unknown resource: ${uri}`, { details: { uri } });
  const { source, own } = await locateUri(deps, call, uri, unknown);
  if (!source.offers().resources) throw unknown;
  if (subscribing) await source.subscribe(own, subscriber, bounds(deps, call.signal));
  else await source.unsubscribe(own, subscriber, bounds(deps, call.signal));
  return {};
}

export async function getPrompt(deps: ToolsDeps, call: FederationCall, name: string, args: Record<string, string>): Promise<McpObject> {
  const unknown = new ServiceError("NOT_FOUND", `Unknown prompt: ${name}`);
  const { source, own } = await locatePrompt(deps, call, name, unknown);
  if (!source.offers().prompts) throw unknown;
  const result = await source.getPrompt(own, args, bounds(deps, call.signal));
  if (call.server !== undefined) return result;
  const messages = ((result.messages as McpObject[] | undefined) ?? []).map((message) =>
    message.content && typeof message.content === "object"
      ? { ...message, content: renameContent(uriPrefix(source), message.content as McpObject) }
      : message,
  );
  return { ...result, messages };
}

/**
 * `completion/complete` for a namespaced prompt (`s__<prompt>`) or resource template
 * (`s+<uriTemplate>`), answered by its server with the server's own ref. A ref of a server
 * the caller does not see, or that offers no completions, is the same NOT_FOUND as an unknown one.
 */
export async function complete(deps: ToolsDeps, call: FederationCall, params: McpCompleteParams): Promise<McpObject> {
  const { ref } = params;
  const unknown =
    ref.type === "ref/prompt"
      ? new ServiceError("NOT_FOUND", `Unknown prompt: ${ref.name}`)
      : new ServiceError("NOT_FOUND", `Unknown resource template: ${ref.uri}`, { details: { uri: ref.uri } });
  const parsed = call.server !== undefined ? { server: call.server, ref } : ownRef(ref);
  const source = await resolve(deps, call, parsed, unknown);
  if (!source.offers().completions) throw unknown;
  return source.complete({ ...params, ref: parsed!.ref }, bounds(deps, call.signal));
}

/** A namespaced completion ref back to its server and the server's own ref. */
function ownRef(ref: McpCompleteParams["ref"]): { server: string; ref: McpCompleteParams["ref"] } | undefined {
  if (ref.type === "ref/prompt") {
    const parsed = splitName(ref.name);
    return parsed && { server: parsed.server, ref: { type: "ref/prompt", name: parsed.name } };
  }
  const parsed = splitUri(ref.uri);
  return parsed && { server: parsed.server, ref: { type: "ref/resource", uri: parsed.uri } };
}
