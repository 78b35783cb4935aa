import type { Principal } from "../auth.js";
import { ServiceError } from "../errors.js";
import type { Services } from "../services.js";
import type { McpCompleteParams, McpObject, McpOffers, UpstreamServerHandle } from "./ports.js";
import { NAMESPACE_SEPARATOR } from "./sources.js";
import { scopeOfPrincipal } from "./visible-tools.js";

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
async function sourcesOf(services: Services, call: FederationCall): Promise<UpstreamServerHandle[]> {
  const scope = await scopeOfPrincipal(services, call.principal);
  if (call.server === undefined) return services.upstream.visible(scope);
  const handle = services.upstream.find(scope, call.server);
  if (!handle) throw new ServiceError("NOT_FOUND", `No MCP server named ${call.server}`);
  return [handle];
}

/** Admission of a server's own endpoint: the caller's tenant owns it, or it is shared; anything else is the same 404. */
export async function requireVisibleServer(services: Services, principal: Principal, server: string): Promise<void> {
  await sourcesOf(services, { principal, server });
}

const bounds = (services: Services, signal?: AbortSignal) => ({ timeoutMs: services.config.GATEWAY_TIMEOUT_SECONDS * 1000, ...(signal ? { signal } : {}) });

/** What the sources offer, for the capabilities an MCP server declares at initialize. */
export async function federatedCapabilities(services: Services, call: FederationCall): Promise<McpOffers> {
  const offers = (await sourcesOf(services, call)).map((source) => source.offers());
  const some = (key: keyof McpOffers) => offers.some((offer) => offer[key]);
  return { resources: some("resources"), prompts: some("prompts"), subscribe: some("subscribe"), completions: some("completions") };
}

type Lister = (source: UpstreamServerHandle) => Promise<McpObject[]>;

/** Every source's list, each item renamed for the caller; a source that fails lists nothing (like the tool catalog). */
async function collect(services: Services, call: FederationCall, list: Lister, rename: (server: string, item: McpObject) => McpObject): Promise<McpObject[]> {
  const sources = await sourcesOf(services, call);
  const lists = await Promise.all(sources.map((source) => list(source).catch(() => [] as McpObject[])));
  return lists.flatMap((items, index) => (call.server === undefined ? items.map((item) => rename(sources[index]!.name, item)) : items));
}

const withMeta = (item: McpObject, meta: Record<string, unknown>): McpObject => ({ ...item, _meta: { ...((item._meta as Record<string, unknown> | undefined) ?? {}), ...meta } });

export function listResources(services: Services, call: FederationCall): Promise<McpObject[]> {
  return collect(services, call, (source) => source.listResources(bounds(services, call.signal)), (server, item) =>
    withMeta({ ...item, uri: namespacedUri(server, String(item.uri)) }, { server, uri: item.uri }),
  );
}

export function listResourceTemplates(services: Services, call: FederationCall): Promise<McpObject[]> {
  return collect(services, call, (source) => source.listResourceTemplates(bounds(services, call.signal)), (server, item) =>
    withMeta({ ...item, uriTemplate: namespacedUri(server, String(item.uriTemplate)) }, { server, uriTemplate: item.uriTemplate }),
  );
}

export function listPrompts(services: Services, call: FederationCall): Promise<McpObject[]> {
  return collect(services, call, (source) => source.listPrompts(bounds(services, call.signal)), (server, item) =>
    withMeta({ ...item, name: `${server}${NAMESPACE_SEPARATOR}${String(item.name)}` }, { server, name: item.name }),
  );
}

/** The source of a namespaced name or URI, resolved only among the servers the caller sees. */
async function resolve(services: Services, call: FederationCall, parsed: { server: string } | undefined, unknown: ServiceError): Promise<UpstreamServerHandle> {
  if (call.server !== undefined) return (await sourcesOf(services, call))[0]!;
  if (!parsed) throw unknown;
  const handle = services.upstream.find(await scopeOfPrincipal(services, call.principal), parsed.server);
  if (!handle) throw unknown;
  return handle;
}

/** Renames the URIs of embedded resources and resource links in contents and prompt messages. */
function renameContent(server: string, content: McpObject): McpObject {
  if (content.type === "resource_link" && typeof content.uri === "string") return { ...content, uri: namespacedUri(server, content.uri) };
  if (content.type === "resource" && content.resource && typeof (content.resource as McpObject).uri === "string") {
    const resource = content.resource as McpObject;
    return { ...content, resource: { ...resource, uri: namespacedUri(server, String(resource.uri)) } };
  }
  return content;
}

export async function readResource(services: Services, call: FederationCall, uri: string): Promise<McpObject> {
  const parsed = call.server === undefined ? splitUri(uri) : { server: call.server, uri };
  const source = await resolve(services, call, parsed, new ServiceError("NOT_FOUND", `Unknown resource: ${uri}`, { details: { uri } }));
  if (!source.offers().resources) throw new ServiceError("NOT_FOUND", `Unknown resource: ${uri}`, { details: { uri } });
  const result = await source.readResource(parsed!.uri, bounds(services, call.signal));
  if (call.server !== undefined) return result;
  const contents = ((result.contents as McpObject[] | undefined) ?? []).map((content) => (typeof content.uri === "string" ? { ...content, uri: namespacedUri(source.name, content.uri) } : content));
  return { ...result, contents };
}

/**
 * `resources/subscribe` of a namespaced URI for one MCP session: relayed to its server (once per
 * URI), whose `notifications/resources/updated` then reach that session, renamed. An unknown URI
 * (or one of a server the caller does not see) is NOT_FOUND, like resources/read.
 */
export async function subscribe(services: Services, call: FederationCall, uri: string, subscriber: string, subscribing: boolean): Promise<Record<string, never>> {
  const parsed = call.server === undefined ? splitUri(uri) : { server: call.server, uri };
  const source = await resolve(services, call, parsed, new ServiceError("NOT_FOUND", `Unknown resource: ${uri}`, { details: { uri } }));
  if (!source.offers().resources) throw new ServiceError("NOT_FOUND", `Unknown resource: ${uri}`, { details: { uri } });
  if (subscribing) await source.subscribe(parsed!.uri, subscriber, bounds(services, call.signal));
  else await source.unsubscribe(parsed!.uri, subscriber, bounds(services, call.signal));
  return {};
}

export async function getPrompt(services: Services, call: FederationCall, name: string, args: Record<string, string>): Promise<McpObject> {
  const parsed = call.server === undefined ? splitName(name) : { server: call.server, name };
  const source = await resolve(services, call, parsed, new ServiceError("NOT_FOUND", `Unknown prompt: ${name}`));
  if (!source.offers().prompts) throw new ServiceError("NOT_FOUND", `Unknown prompt: ${name}`);
  const result = await source.getPrompt(parsed!.name, args, bounds(services, call.signal));
  if (call.server !== undefined) return result;
  const messages = ((result.messages as McpObject[] | undefined) ?? []).map((message) =>
    message.content && typeof message.content === "object" ? { ...message, content: renameContent(source.name, message.content as McpObject) } : message,
  );
  return { ...result, messages };
}

/**
 * `completion/complete` for a namespaced prompt (`s__<prompt>`) or resource template
 * (`s+<uriTemplate>`), answered by its server with the server's own ref. A ref of a server
 * the caller does not see, or that offers no completions, is the same NOT_FOUND as an unknown one.
 */
export async function complete(services: Services, call: FederationCall, params: McpCompleteParams): Promise<McpObject> {
  const { ref } = params;
  const unknown =
    ref.type === "ref/prompt" ? new ServiceError("NOT_FOUND", `Unknown prompt: ${ref.name}`) : new ServiceError("NOT_FOUND", `Unknown resource template: ${ref.uri}`, { details: { uri: ref.uri } });
  const parsed = call.server !== undefined ? { server: call.server, ref } : ownRef(ref);
  const source = await resolve(services, call, parsed, unknown);
  if (!source.offers().completions) throw unknown;
  return source.complete({ ...params, ref: parsed!.ref }, bounds(services, call.signal));
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
