import type { Middleware } from "h3";
import ipaddr from "ipaddr.js";
import type { Config } from "../rpc/config.js";
import { ServiceError } from "../rpc/errors.js";
import { refuse, type Observers } from "./transport/instrument.js";
import { surfaceOfPath } from "../rpc/surfaces.js";

/** The host part of a `Host` header or URL host: lowercased, without port, IPv6 brackets kept off. */
function hostName(value: string): string {
  const host = value.trim().toLowerCase();
  if (host.startsWith("[")) return host.slice(1, host.indexOf("]"));
  const colon = host.lastIndexOf(":");
  return colon > 0 && host.indexOf(":") === colon ? host.slice(0, colon) : host;
}

function isLoopback(host: string): boolean {
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  if (!ipaddr.isValid(host)) return false;
  const address = ipaddr.process(host);
  return address.range() === "loopback";
}

/**
 * Which `Host` values the service answers (DNS-rebinding protection): ALLOWED_HOSTS when set
 * (plus PUBLIC_URL's host); otherwise, when bound to a loopback address, loopback names and
 * addresses and PUBLIC_URL's host; otherwise any. Undefined means "any".
 */
function hostRule(config: Pick<Config, "HOST" | "PUBLIC_URL" | "ALLOWED_HOSTS">): ((host: string) => boolean) | undefined {
  const listed = new Set(
    (config.ALLOWED_HOSTS ?? "")
      .split(",")
      .map((entry) => hostName(entry))
      .filter(Boolean),
  );
  if (config.PUBLIC_URL) listed.add(hostName(new URL(config.PUBLIC_URL).host));
  if (config.ALLOWED_HOSTS) return (host) => listed.has(hostName(host));
  if (!isLoopback(hostName(config.HOST))) return undefined;
  // The verdict per Host value is kept: clients send the same few on every request.
  const verdicts = new Map<string, boolean>();
  return (host) => {
    let verdict = verdicts.get(host);
    if (verdict === undefined) {
      const name = hostName(host);
      verdict = isLoopback(name) || listed.has(name);
      if (verdicts.size >= 1_000) verdicts.clear();
      verdicts.set(host, verdict);
    }
    return verdict;
  };
}

type HostConfig = Pick<Config, "HOST" | "PUBLIC_URL" | "ALLOWED_HOSTS">;

/** One check per configuration: both front doors ask the same one (and share its verdicts). */
const checks = new WeakMap<HostConfig, (host: string | null | undefined) => boolean>();

/**
 * The one host check of every request (DNS-rebinding protection, hostRule): true when the
 * service answers this `Host` header. A request without one is answered only where any host is.
 * The h3 app's middleware (hostCheckMiddleware) and the REST routes served without h3
 * (facade/native-routes.ts, which leave a refused host to the middleware's 403) both use it.
 */
export function hostCheck(config: HostConfig): (host: string | null | undefined) => boolean {
  let check = checks.get(config);
  if (!check) {
    const allowed = hostRule(config);
    check = allowed ? (host) => Boolean(host && allowed(host)) : () => true;
    checks.set(config, check);
  }
  return check;
}

/** 403 in the surface's envelope, before anything else runs, for a `Host` the service does not answer. */
export function hostCheckMiddleware(config: Config, observers: Observers): Middleware {
  const servesHost = hostCheck(config);
  return (event, next) => {
    const host = event.req.headers.get("host");
    if (servesHost(host)) return next();
    const surface = surfaceOfPath(event.url.pathname) ?? "gateway";
    return refuse(
      event,
      surface,
      observers,
      new ServiceError("FORBIDDEN", `Host ${host || "(none)"} is not served here; set ALLOWED_HOSTS to serve it`),
    );
  };
}
