import { lookup as dnsLookup } from "node:dns/promises";
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type OutgoingHttpHeaders } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { addressRefusal } from "./private-address.js";

/** One address a host name resolves to. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/**
 * Resolves a host name to every address it has right now. The system resolver by default;
 * tests pass their own so a public-looking name can resolve to loopback without any DNS.
 */
export type ResolveHost = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolver: ResolveHost = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map((entry) => ({
    address: entry.address,
    family: entry.family === 6 ? 6 : 4,
  }));

/** A connection refused by the address rule; its message says which address and why. */
export class AddressRefused extends Error {
  override name = "AddressRefused";
  constructor(
    readonly host: string,
    readonly address: string,
    readonly reason: string,
  ) {
    super(host === address ? `Refused: ${address} is a ${reason}` : `Refused: ${host} resolves to ${address}, a ${reason}`);
  }
}

/** What OutboundGuard.open sends. */
export interface GuardedOpenInit {
  method: string;
  headers: OutgoingHttpHeaders;
  signal?: AbortSignal;
  /**
   * false: a fresh socket for this request, closed after it (nothing kept alive between
   * users' calls, as `http_fetch` wants). Default: this guard's keep-alive agents.
   */
  agent?: false;
}

export interface OutboundGuardOptions {
  /** Name resolution (default: the system resolver). */
  resolve?: ResolveHost;
  /**
   * Allow private and loopback addresses. Default false: a connection made on a user's
   * behalf must not reach inside the deployment (SSRF). MCP_SERVERS_ALLOW_PRIVATE turns it on
   * for upstream MCP servers only.
   */
  allowPrivate?: boolean;
  /** Appended to refusal messages, e.g. how an operator may allow the address. */
  hint?: string;
}

/**
 * The address rule applied at connection time, for every connection (docs/security.md
 * "Outbound connections"): resolve the name, check every address it has, and connect to
 * exactly the checked address. The check is the socket's own `lookup`, so there is no window
 * between check and connect in which DNS could answer differently (rebinding); a literal IP
 * in a URL is checked before the request, since sockets skip `lookup` for literals.
 *
 * The agents are this guard's own: a kept-alive socket opened by some other client (without
 * the check) is never reused for a guarded request.
 */
export class OutboundGuard {
  readonly allowPrivate: boolean;
  readonly #resolve: ResolveHost;
  readonly #hint: string;
  #http: HttpAgent | undefined;
  #https: HttpsAgent | undefined;

  constructor(options: OutboundGuardOptions = {}) {
    this.allowPrivate = options.allowPrivate === true;
    this.#resolve = options.resolve ?? systemResolver;
    this.#hint = options.hint ? `; ${options.hint}` : "";
  }

  /** Throws AddressRefused when `address` (a literal) breaks the rule. */
  checkAddress(address: string, host = address): void {
    if (this.allowPrivate) return;
    const reason = addressRefusal(address);
    if (reason) throw this.#refused(host, address, reason);
  }

  /**
   * The addresses `hostname` resolves to now, all of them checked (one bad address refuses the
   * name: a resolver that mixes public and private answers is not trusted with either).
   */
  async resolve(hostname: string): Promise<ResolvedAddress[]> {
    const bare = hostname.replace(/^\[|\]$/g, "");
    const family = isIP(bare);
    if (family) {
      this.checkAddress(bare);
      return [{ address: bare, family: family === 6 ? 6 : 4 }];
    }
    const addresses = await this.#resolve(bare);
    if (addresses.length === 0) throw Object.assign(new Error(`${bare} has no address`), { code: "ENOTFOUND" });
    for (const entry of addresses) this.checkAddress(entry.address, bare);
    return addresses;
  }

  /** A `lookup` for `net.connect`/`http.request`: resolves through `resolve`, so every socket is checked. */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    this.resolve(hostname).then(
      (addresses) => {
        const wanted = options.family === 4 || options.family === "IPv4" ? 4 : options.family === 6 || options.family === "IPv6" ? 6 : 0;
        const usable = wanted ? addresses.filter((entry) => entry.family === wanted) : addresses;
        if (usable.length === 0) {
          callback(Object.assign(new Error(`${hostname} has no IPv${wanted} address`), { code: "ENOTFOUND" }), "", 0);
          return;
        }
        if (options.all) (callback as unknown as (error: null, all: ResolvedAddress[]) => void)(null, usable);
        else callback(null, usable[0]!.address, usable[0]!.family);
      },
      (error: Error) => callback(error as NodeJS.ErrnoException, "", 0),
    );
  };

  /**
   * Opens one request under the rule: the one way every outbound path of the service
   * (guarded fetch, guarded request, `http_fetch`, webhooks) reaches a server. http and https
   * only; a literal address is checked here (sockets skip `lookup` for literals), a name by
   * `lookup` on the address the socket connects to — so the rule applies after DNS and to
   * every hop of a redirect the caller follows (each hop is a new open()). Throws
   * (synchronously) a TypeError for another scheme and AddressRefused for a refused literal.
   */
  open(url: URL, init: GuardedOpenInit): ClientRequest {
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`guarded fetch: unsupported protocol ${url.protocol}`);
    const literal = url.hostname.replace(/^\[|\]$/g, "");
    if (isIP(literal)) this.checkAddress(literal);
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    return send(url, {
      method: init.method,
      headers: init.headers,
      agent: init.agent === false ? false : this.agent(url.protocol),
      lookup: this.lookup,
      ...(init.signal ? { signal: init.signal } : {}),
    });
  }

  /** Keep-alive agents whose sockets all went through `lookup`. */
  agent(protocol: string): HttpAgent {
    if (protocol === "https:") return (this.#https ??= new HttpsAgent({ keepAlive: true, lookup: this.lookup }));
    return (this.#http ??= new HttpAgent({ keepAlive: true, lookup: this.lookup }));
  }

  /** Closes the idle sockets of this guard's agents. */
  close(): void {
    this.#http?.destroy();
    this.#https?.destroy();
    this.#http = undefined;
    this.#https = undefined;
  }

  #refused(host: string, address: string, reason: string): AddressRefused {
    const error = new AddressRefused(host, address, reason);
    error.message += this.#hint;
    return error;
  }
}
