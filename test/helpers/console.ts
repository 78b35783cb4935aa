import type { TestServer } from "./server.js";

/** The `gw_console` cookie as a browser would keep it, read from a Set-Cookie header. */
export interface ConsoleCookie {
  /** `gw_console=<token>`, ready for a `Cookie` request header. */
  pair: string;
  /** The raw Set-Cookie line, for attribute checks. */
  raw: string;
}

export function consoleCookieFrom(headers: Headers): ConsoleCookie | undefined {
  const raw = headers.getSetCookie().find((line) => line.startsWith("gw_console="));
  if (!raw) return undefined;
  return { pair: raw.split(";")[0]!, raw };
}

/** Signs in to the console over HTTP and returns the session cookie. */
export async function consoleSignIn(server: TestServer, email: string, password: string): Promise<ConsoleCookie> {
  const res = await server.request("/api/session", { method: "POST", json: { email, password } });
  const cookie = consoleCookieFrom(res.headers);
  if (res.status !== 200 || !cookie) throw new Error(`console sign-in failed: ${res.status} ${JSON.stringify(res.body)}`);
  return cookie;
}

export const withCookie = (cookie: ConsoleCookie) => ({ cookie: cookie.pair });
