import * as v from "valibot";
import { LOCAL_ADMIN } from "../auth.js";
import { ServiceError } from "../errors.js";
import { loadPlans } from "../money/allowance.js";
import type { User } from "../../storage/repos/users.js";
import { UserView } from "../views.js";
import { publicUser, registerAccount } from "./accounts.js";
import { Email, FullName, Password } from "./methods.js";
import { accountsDomain, type AccountsDeps } from "./deps.js";

/** An existing user's email: looked up as given (normalised), not held to registration's format. */
const UserEmail = v.pipe(v.string("email must be a string"), v.trim(), v.minLength(1, "email is required"), v.maxLength(254));

async function userByEmail(deps: AccountsDeps, email: string): Promise<User> {
  const user = await deps.users.byEmail(email);
  if (!user) throw new ServiceError("NOT_FOUND", `No user with email ${email}`);
  return user;
}

/** What an operator sees of a user: the public fields and the operator flag. */
const OperatorUserView = v.object({ ...UserView.entries, operator: v.boolean() });
const operatorView = (user: User) => ({ ...publicUser(user), operator: user.operator === true });

export const operatorUsersCreate = accountsDomain.method({
  name: "operator.users.create",
  summary: "A user with a personal tenant and default workspace, by the rules of Gateway register (the full name may be empty).",
  input: v.object({ email: Email, password: Password, fullName: v.optional(FullName, "") }),
  auth: LOCAL_ADMIN,
  internal: true,
  http: [],
  output: v.object({ user: UserView }),
  errors: { VALIDATION_FAILED: {}, BAD_REQUEST: {}, CONFLICT: {} },
  async handler(params, ctx) {
    return { user: publicUser(await registerAccount(ctx.deps, params)) };
  },
});

export const operatorUsersGet = accountsDomain.method({
  name: "operator.users.get",
  summary: "A user by email, with the operator flag.",
  input: v.object({ email: UserEmail }),
  auth: LOCAL_ADMIN,
  internal: true,
  http: [],
  output: v.object({ user: OperatorUserView }),
  errors: { NOT_FOUND: {} },
  async handler(params, ctx) {
    return { user: operatorView(await userByEmail(ctx.deps, params.email)) };
  },
});

export const operatorUsersUpdate = accountsDomain.method({
  name: "operator.users.update",
  summary: "Sets a user's Account API `plan` (an id of PLANS_JSON) and/or the `operator` flag; answers the user and the values before.",
  input: v.pipe(
    v.object({
      email: UserEmail,
      plan: v.optional(v.pipe(v.string("plan must be a string"), v.trim(), v.minLength(1, "plan is required"), v.maxLength(64))),
      operator: v.optional(v.boolean("operator must be true or false")),
    }),
    v.check((input) => input.plan !== undefined || input.operator !== undefined, "Give plan or operator"),
  ),
  auth: LOCAL_ADMIN,
  internal: true,
  http: [],
  output: v.object({ user: OperatorUserView, previous: v.object({ plan: v.string(), operator: v.boolean() }) }),
  errors: { NOT_FOUND: {}, VALIDATION_FAILED: {} },
  async handler(params, ctx) {
    const user = await userByEmail(ctx.deps, params.email);
    if (params.plan !== undefined) {
      const plans = loadPlans(ctx.deps.config);
      if (!plans[params.plan]) {
        const message = `Unknown plan ${JSON.stringify(params.plan)}; configured plans: ${Object.keys(plans).join(", ")}`;
        throw new ServiceError("VALIDATION_FAILED", message, { details: { issues: [{ path: "plan", message }] } });
      }
    }
    const next: User = {
      ...user,
      ...(params.plan !== undefined ? { plan: params.plan } : {}),
      ...(params.operator !== undefined ? { operator: params.operator } : {}),
    };
    await ctx.deps.users.put(next);
    ctx.deps.log.info({
      requestId: ctx.requestId,
      event: "user.updated",
      userId: user.id,
      plan: next.plan,
      operator: next.operator === true,
      by: ctx.principal.userId,
    });
    return { user: operatorView(next), previous: { plan: user.plan, operator: user.operator === true } };
  },
});

/**
 * Users as the admin command manages them (docs/console-and-admin.md): internal methods, reached
 * only by dispatch from `npm run admin` as the local administrator, never over `/rpc`, REST or
 * OpenAPI. Creating a user follows Gateway register's rules (`registerAccount`).
 */
export const operatorUserMethods = [operatorUsersCreate, operatorUsersGet, operatorUsersUpdate];
