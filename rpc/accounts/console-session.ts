import * as v from "valibot";
import { ServiceError } from "../errors.js";
import { checkPassword } from "./methods.js";
import { publicUser } from "./accounts.js";
import { CONSOLE_COOKIE, SURFACES } from "../surfaces.js";
import { Success, Timestamp, UserView } from "../views.js";
import { accountsDomain, type AccountsContext } from "./deps.js";

/**
 * Console sign-in (docs/interface.md 5: console key endpoints take a browser session cookie only). The
 * cookie holds an ordinary session token, HttpOnly so page scripts never see it, SameSite=Lax
 * so another site cannot make the browser send it with a POST, PATCH or DELETE, and Secure
 * when the service is published over https. Its path is the console base, `/api`.
 */
const COOKIE_PATH = SURFACES.console.base;

/**
 * Sets (or, with an empty value and 0, clears) the session cookie on the response, through the
 * HTTP transport's cookie writer (facade/transport/cookies.ts); a transport without one has no
 * cookies to set.
 */
function setSessionCookie(ctx: AccountsContext, value: string, maxAgeSeconds: number): void {
  ctx.setCookie?.(CONSOLE_COOKIE, value, {
    path: COOKIE_PATH,
    maxAge: maxAgeSeconds,
    httpOnly: true,
    sameSite: "lax",
    secure: Boolean(ctx.deps.config.PUBLIC_URL?.startsWith("https:")),
  });
}

const Credentials = v.object({
  email: v.pipe(v.string("email must be a string"), v.trim(), v.minLength(1, "email is required"), v.maxLength(254)),
  password: v.pipe(v.string("password must be a string"), v.minLength(1, "password is required"), v.maxLength(256)),
});

export const consoleSessionMethods = [
  accountsDomain.method({
    name: "console.session.create",
    summary: "Console sign-in: checks email and password and sets the HttpOnly `gw_console` session cookie.",
    input: Credentials,
    auth: "public",
    output: v.object({ user: UserView, expiresAt: Timestamp }),
    errors: { UNAUTHORIZED: {}, RATE_LIMITED: {} },
    http: [{ surface: "console", method: "POST", path: "/session" }],
    async handler(params, ctx) {
      // Same throttled check as the Gateway login (rpc/accounts/login-throttle.ts).
      const user = await checkPassword(ctx.deps, params.email, params.password, ctx);
      const { token, expiresAt } = await ctx.deps.sessions.issue(user.id);
      const maxAge = Math.max(0, Math.floor((expiresAt.getTime() - Date.now()) / 1000));
      setSessionCookie(ctx, token, maxAge);
      ctx.responseHeaders.set("cache-control", "no-store");
      return { user: publicUser(user), expiresAt: expiresAt.toISOString() };
    },
  }),

  accountsDomain.method({
    name: "console.session.get",
    summary: "The user signed in to the console, and when the session ends.",
    input: v.object({}),
    auth: { kinds: ["console"] },
    output: v.object({
      user: UserView,
      expiresAt: Timestamp,
      operator: v.pipe(v.boolean(), v.description("The user may grant credits (npm run admin -- grant-operator)")),
    }),
    http: [{ surface: "console", method: "GET", path: "/session" }],
    async handler(_params, ctx) {
      const principal = ctx.principal;
      const user = await ctx.deps.users.get(principal.userId);
      if (!user) throw new ServiceError("UNAUTHORIZED", "Not signed in");
      return { user: publicUser(user), expiresAt: new Date(principal.session!.expiresAt).toISOString(), operator: user.operator === true };
    },
  }),

  accountsDomain.method({
    name: "console.session.delete",
    summary: "Console sign-out: revokes the session and clears the cookie.",
    input: v.object({}),
    auth: { kinds: ["console"] },
    output: Success,
    http: [{ surface: "console", method: "DELETE", path: "/session" }],
    async handler(_params, ctx) {
      // Revoked server-side too: a copied cookie stops working, not just the browser's.
      await ctx.deps.sessions.revoke(ctx.principal.session!);
      setSessionCookie(ctx, "", 0);
      return { success: true };
    },
  }),
];
