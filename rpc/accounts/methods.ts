import * as v from "valibot";
import { ServiceError } from "../errors.js";
import { burnPasswordCheck, verifyPassword } from "../credentials/passwords.js";
import { publicUser, registerAccount } from "./accounts.js";
import { UsersRepo } from "../../storage/repos/users.js";
import { SessionIssued, Success, UserView } from "../views.js";
import { accountsDomain, type AccountsDeps } from "./deps.js";

export const Email = v.pipe(v.string("email must be a string"), v.trim(), v.maxLength(254), v.email("email must be a valid email address"));
export const Password = v.pipe(v.string("password must be a string"), v.minLength(1, "password is required"), v.maxLength(256));
/** A user's full name as stored; registration also requires one (`minLength(1)`). */
export const FullName = v.pipe(v.string("fullName must be a string"), v.trim(), v.maxLength(200));

const Credentials = v.object({ email: Email, password: Password });

/**
 * Checks an email and password under the sign-in throttle (./login-throttle.ts): failures are
 * counted per email and source address, and past the limit attempts are slowed, not refused for
 * the right password. Unknown email and wrong password take the same time and give the same 401.
 */
export async function checkPassword(
  deps: AccountsDeps,
  email: string,
  password: string,
  ctx: { ip: string; signal?: AbortSignal; logFields?: Record<string, unknown> },
) {
  let found: Awaited<ReturnType<AccountsDeps["users"]["byEmail"]>>;
  await deps.loginThrottle.check(
    UsersRepo.normalizeEmail(email),
    ctx.ip,
    async () => {
      found = await deps.users.byEmail(email);
      return found ? await verifyPassword(password, found.passwordHash) : (await burnPasswordCheck(password), false);
    },
    { signal: ctx.signal, logFields: ctx.logFields },
  );
  return found!;
}

async function issueSession(deps: AccountsDeps, userId: string) {
  const { token, expiresAt } = await deps.sessions.issue(userId);
  return { token, tokenType: "Bearer", expiresAt: expiresAt.toISOString() };
}

export const authMethods = [
  accountsDomain.method({
    name: "auth.register",
    summary: "Create a user with a personal tenant and default workspace; returns a session token.",
    input: v.object({
      email: Email,
      password: Password,
      fullName: v.pipe(FullName, v.minLength(1, "fullName is required")),
    }),
    auth: "public",
    output: SessionIssued,
    errors: { VALIDATION_FAILED: {}, BAD_REQUEST: {}, CONFLICT: {} },
    http: [{ surface: "gateway", method: "POST", path: "/auth/register", status: 201 }],
    async handler(params, ctx) {
      const user = await registerAccount(ctx.deps, params);
      return { user: publicUser(user), ...(await issueSession(ctx.deps, user.id)) };
    },
  }),

  accountsDomain.method({
    name: "auth.login",
    summary: "Exchange an email and password for a session token.",
    input: Credentials,
    auth: "public",
    output: SessionIssued,
    errors: { UNAUTHORIZED: {}, RATE_LIMITED: {} },
    http: [{ surface: "gateway", method: "POST", path: "/auth/login" }],
    async handler(params, ctx) {
      const user = await checkPassword(ctx.deps, params.email, params.password, ctx);
      return { user: publicUser(user), ...(await issueSession(ctx.deps, user.id)) };
    },
  }),

  accountsDomain.method({
    name: "auth.logout",
    summary: "Revoke the session token used for this request.",
    input: v.object({}),
    auth: { kinds: ["session"] },
    output: Success,
    http: [{ surface: "gateway", method: "POST", path: "/auth/logout" }],
    async handler(_params, ctx) {
      const session = ctx.principal.session!;
      await ctx.deps.sessions.revoke(session);
      return { success: true };
    },
  }),

  accountsDomain.method({
    name: "auth.me",
    summary: "The signed-in user, their tenant and workspace, and how they authenticated.",
    input: v.object({}),
    auth: { kinds: ["session", "gateway_key"] },
    output: v.object({
      user: UserView,
      tenant: v.nullable(v.object({ id: v.string(), slug: v.string(), name: v.string(), plan: v.string() })),
      authenticatedBy: v.picklist(["session", "api_key"]),
    }),
    http: [{ surface: "gateway", method: "GET", path: "/auth/me" }],
    async handler(_params, ctx) {
      const principal = ctx.principal;
      const user = await ctx.deps.users.get(principal.userId);
      if (!user) throw new ServiceError("UNAUTHORIZED", "Invalid or expired credentials");
      const tenant = await ctx.deps.tenants.getTenant(user.tenantId);
      return {
        user: publicUser(user),
        tenant: tenant && { id: tenant.id, slug: tenant.slug, name: tenant.name, plan: tenant.plan },
        authenticatedBy: principal.kind === "session" ? ("session" as const) : ("api_key" as const),
      };
    },
  }),
];
