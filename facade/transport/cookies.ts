import { setCookie, type H3Event } from "h3";
import type { SetCookie } from "../../rpc/cookies.js";

/** The cookie writer a call gets on HTTP transports: h3's serializer, into the answer's header sink. */
export function cookieWriter(headers: Headers): SetCookie {
  // h3's setCookie writes to the response headers only: the call's header sink is enough.
  const sink = { res: { headers } } as unknown as H3Event;
  return (name, value, options) => setCookie(sink, name, value, options);
}
