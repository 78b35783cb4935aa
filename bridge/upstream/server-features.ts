import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { ServiceError } from "../../rpc/errors.js";
import type { McpCompleteParams, McpObject, McpOffers } from "../../rpc/tools/ports.js";
import { MAX_PAGES } from "./announced-tools.js";
import { describeError } from "./describe-error.js";
import type { OwnSessions } from "./own-sessions.js";

export type RequestBounds = { timeoutMs: number; signal?: AbortSignal };

/** The SDK's request options for our bounds (its option is `timeout`). */
const sdkOptions = (bounds: RequestBounds) => ({ timeout: bounds.timeoutMs, ...(bounds.signal ? { signal: bounds.signal } : {}) });

/** What the features of one server need of its connection (bridge/upstream/connection.ts). */
export interface FeaturesTarget {
  /** The server's name, in errors. */
  name: string;
  timeoutMs: number;
  /** The shared connection's client while the server is healthy, else undefined. */
  client(): Client | undefined;
  offers(): McpOffers;
  own: OwnSessions;
}

/**
 * An upstream server's features besides tools (docs/mcp.md "Resources and prompts",
 * "Subscriptions and list changes", "Completions"): lists, reads, prompts and completions
 * forwarded to it, their failures as the catalog's errors, and the gateway's resource
 * subscriptions there with the sessions that hold each.
 */
export class ServerFeatures {
  /** Subscribed URIs (the server's own) and the sessions that subscribed to each. */
  readonly #subscribers = new Map<string, Set<string>>();
  readonly #target: FeaturesTarget;

  constructor(target: FeaturesTarget) {
    this.#target = target;
  }

  /** The sessions subscribed to `uri`. */
  subscribersOf(uri: string): string[] {
    return [...(this.#subscribers.get(uri) ?? [])];
  }

  /** Every URI some session is subscribed to (renewed on a new connection). */
  subscribed(): string[] {
    return [...this.#subscribers.keys()];
  }

  async subscribe(uri: string, subscriber: string, options: RequestBounds): Promise<void> {
    if (this.#subscribers.get(uri)?.has(subscriber)) return;
    if (!this.#target.offers().subscribe)
      throw new ServiceError("NOT_FOUND", `MCP server ${this.#target.name} offers no resource subscriptions`);
    // The server is asked once per URI; it may be asked twice when two sessions race (harmless).
    if (!this.#subscribers.get(uri)?.size)
      await this.#forward("resources", `subscription to ${uri}`, options, (client) =>
        client.subscribeResource({ uri }, sdkOptions(options)),
      );
    let subscribers = this.#subscribers.get(uri);
    if (!subscribers) this.#subscribers.set(uri, (subscribers = new Set()));
    subscribers.add(subscriber);
  }

  async unsubscribe(uri: string, subscriber: string, options: RequestBounds): Promise<void> {
    const subscribers = this.#subscribers.get(uri);
    if (!subscribers?.delete(subscriber) || subscribers.size > 0) return;
    this.#subscribers.delete(uri);
    await this.#forward("resources", `unsubscription from ${uri}`, options, (client) =>
      client.unsubscribeResource({ uri }, sdkOptions(options)),
    ).catch(() => undefined);
  }

  /** A session ended: its subscriptions go, and the server is told about URIs nobody holds any more. */
  release(subscriber: string): void {
    for (const uri of [...this.#subscribers.keys()]) void this.unsubscribe(uri, subscriber, { timeoutMs: this.#target.timeoutMs });
  }

  listResources(options: RequestBounds): Promise<McpObject[]> {
    return this.#allPages(
      "resources",
      (client, cursor) => client.listResources(cursor ? { cursor } : {}, sdkOptions(options)),
      (page) => page.resources,
    );
  }

  listResourceTemplates(options: RequestBounds): Promise<McpObject[]> {
    return this.#allPages(
      "resources",
      (client, cursor) => client.listResourceTemplates(cursor ? { cursor } : {}, sdkOptions(options)),
      (page) => page.resourceTemplates,
    );
  }

  listPrompts(options: RequestBounds): Promise<McpObject[]> {
    return this.#allPages(
      "prompts",
      (client, cursor) => client.listPrompts(cursor ? { cursor } : {}, sdkOptions(options)),
      (page) => page.prompts,
    );
  }

  // Read, get and complete go on the client session's own upstream session when it has one
  // (the server may ask that client something while answering); lists and subscriptions stay
  // on the shared connection.
  readResource(uri: string, options: RequestBounds): Promise<McpObject> {
    return this.#forward("resources", `resource ${uri}`, options, (client) => client.readResource({ uri }, sdkOptions(options)), true);
  }

  getPrompt(name: string, args: Record<string, string>, options: RequestBounds): Promise<McpObject> {
    return this.#forward(
      "prompts",
      `prompt ${name}`,
      options,
      (client) => client.getPrompt({ name, arguments: args }, sdkOptions(options)),
      true,
    );
  }

  complete(params: McpCompleteParams, options: RequestBounds): Promise<McpObject> {
    const what = params.ref.type === "ref/prompt" ? `completion of prompt ${params.ref.name}` : `completion of ${params.ref.uri}`;
    return this.#forward("completions", what, options, (client) => client.complete(params, sdkOptions(options)), true);
  }

  /** Every page of a list (at most MAX_PAGES); a server that does not offer `capability` lists nothing. */
  async #allPages<P extends { nextCursor?: string }>(
    capability: "resources" | "prompts",
    fetchPage: (client: Client, cursor: string | undefined) => Promise<P>,
    items: (page: P) => McpObject[],
  ): Promise<McpObject[]> {
    if (!this.#target.offers()[capability]) return [];
    const all: McpObject[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page += 1) {
      const result = await this.#forward(capability, `${capability}/list`, undefined, (client) => fetchPage(client, cursor));
      all.push(...items(result));
      cursor = result.nextCursor;
      if (!cursor) break;
    }
    return all;
  }

  /** One request to the server, its failures as the catalog's errors (like tools/call, never retried). */
  async #forward<T>(
    capability: keyof McpOffers,
    what: string,
    options: RequestBounds | undefined,
    send: (client: Client) => Promise<T>,
    own = false,
  ): Promise<T> {
    if (!this.#target.client()) throw new ServiceError("UNAVAILABLE", `MCP server ${this.#target.name} is not connected`);
    if (!this.#target.offers()[capability]) throw new ServiceError("NOT_FOUND", `MCP server ${this.#target.name} offers no ${capability}`);
    const session = own ? await this.#target.own.current() : undefined;
    const client = session?.client ?? this.#target.client();
    if (!client) throw new ServiceError("UNAVAILABLE", `MCP server ${this.#target.name} is not connected`);
    try {
      return await send(client);
    } catch (error) {
      if (session && !(error instanceof McpError) && !options?.signal?.aborted) this.#target.own.close(session.owner.id);
      if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
        throw new ServiceError(
          "TIMEOUT",
          `MCP server ${this.#target.name} did not answer ${what} within ${Math.round(this.#target.timeoutMs / 1000)} s`,
        );
      }
      if (error instanceof McpError)
        throw new ServiceError("BAD_GATEWAY", `MCP server ${this.#target.name} refused ${what}: ${error.message}`, {
          details: { upstreamCode: error.code },
        });
      if (options?.signal?.aborted) throw new ServiceError("TIMEOUT", `Request for ${what} was cancelled`);
      throw new ServiceError(
        "BAD_GATEWAY",
        `MCP server ${this.#target.name} is unreachable: ${describeError(error, this.#target.timeoutMs)}`,
      );
    }
  }
}
