import { getCookie, type HTTPEvent } from "h3";
import type { Presented } from "../../rpc/auth.js";
import type { Dialect } from "../../rpc/define.js";
import { CONSOLE_COOKIE, profileOf, type CallSurface } from "../../rpc/surfaces.js";

/**
 * The credential reader: the presentations a surface accepts (its profile's `credentials`,
 * docs/interface.md 5): Platform and Account take a bearer key only; the console a cookie
 * only; the Gateway, bridge and JSON-RPC a bearer token or `X-API-Key`; a route of the
 * `anthropic` dialect a bearer token or `X-API-Key` on any surface (rpc/surfaces.ts DIALECTS).
 */
export function presentedFor(surface: CallSurface, request: Request, dialect?: Dialect): Presented {
  if (profileOf(surface, dialect).credentials.includes("cookie")) {
    const cookie = getCookie({ req: request } as HTTPEvent, CONSOLE_COOKIE);
    return cookie ? { cookie, viaConsole: true } : { viaConsole: true };
  }
  return presentedIn(surface, (name) => request.headers.get(name), dialect);
}

/** presentedFor() on a surface that takes no cookie, from any request's headers. */
export function presentedIn(surface: CallSurface, header: (name: string) => string | null | undefined, dialect?: Dialect): Presented {
  const accepts = profileOf(surface, dialect).credentials;
  const presented: Presented = {};
  if (accepts.includes("bearer")) {
    const authorization = header("authorization");
    if (authorization) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
      if (match) presented.bearer = match[1];
      else presented.malformedAuthorization = true;
    }
  }
  if (accepts.includes("apiKey")) {
    const apiKey = header("x-api-key")?.trim();
    if (apiKey) presented.apiKey = apiKey;
  }
  return presented;
}
