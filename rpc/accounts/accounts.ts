import { ServiceError } from "../errors.js";
import { hashPassword, passwordProblem } from "../credentials/passwords.js";
import { newId, nowIso } from "../../storage/ids.js";
import type { User } from "../../storage/repos/users.js";
import type { Tenant } from "../../storage/repos/tenants.js";
import { UsersRepo } from "../../storage/repos/users.js";
import type { Repos } from "../repos.js";
import type { Config } from "../config.js";

/**
 * The personal tenant of `user`, with TENANT_DEFAULT_AGENT_LIMIT and
 * TENANT_DEFAULT_TOKENS_PER_MONTH as its limits (docs/agents.md "Limits").
 */
export function personalTenant(
  deps: { config: Pick<Config, "TENANT_DEFAULT_AGENT_LIMIT" | "TENANT_DEFAULT_TOKENS_PER_MONTH"> },
  user: User,
  slug: string,
  now: string,
): Tenant {
  return {
    id: user.tenantId,
    slug,
    name: `${user.fullName || user.email}'s tenant`,
    plan: "free",
    region: "default",
    limits: { agents: deps.config.TENANT_DEFAULT_AGENT_LIMIT, tokensPerMonth: deps.config.TENANT_DEFAULT_TOKENS_PER_MONTH },
    ownerId: user.id,
    createdAt: now,
    updatedAt: now,
  };
}

/**
 * A user with a personal tenant and a default workspace (docs/architecture.md "Identity and money").
 * Crash-consistent by construction (docs/crash-consistency.md): the records are written
 * first, under fresh ids nothing points to yet, and the email is claimed last, atomically —
 * the claim is the commit. Two concurrent registrations cannot both win; a process killed
 * before the claim leaves unreachable records and a free email; the loser of a race removes
 * its records.
 */
export async function createAccount(
  deps: Pick<Repos, "users" | "tenants"> & { config: Pick<Config, "TENANT_DEFAULT_AGENT_LIMIT" | "TENANT_DEFAULT_TOKENS_PER_MONTH"> },
  input: { email: string; password: string; fullName: string },
): Promise<User> {
  const email = UsersRepo.normalizeEmail(input.email);
  if (await deps.users.byEmail(email)) throw emailTaken();
  const passwordHash = await hashPassword(input.password);
  const now = nowIso();
  const user: User = {
    id: newId("usr"),
    email,
    fullName: input.fullName.trim(),
    passwordHash,
    tenantId: newId("ten"),
    workspaceId: newId("ws"),
    plan: "free",
    createdAt: now,
  };
  const slugBase =
    email
      .split("@")[0]!
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-|-$/g, "") || "user";
  await deps.tenants.putTenant(personalTenant(deps, user, `${slugBase}-${user.tenantId.slice(-6).toLowerCase()}`, now));
  await deps.tenants.putWorkspace({
    id: user.workspaceId,
    tenantId: user.tenantId,
    name: "Default",
    status: "active",
    createdAt: now,
    updatedAt: now,
  });
  await deps.users.put(user);
  if (!(await deps.users.claimEmail(email, user.id))) {
    await deps.users.remove(user).catch(() => undefined);
    await deps.tenants.removeWorkspace(user.workspaceId).catch(() => undefined);
    await deps.tenants.removeTenant(user.tenantId).catch(() => undefined);
    throw emailTaken();
  }
  return user;
}

/**
 * Registration's rules, then `createAccount`: the password must be strong enough
 * (BAD_REQUEST naming the problem). Gateway register and the admin command's `create-user`.
 */
export async function registerAccount(
  deps: Parameters<typeof createAccount>[0],
  input: { email: string; password: string; fullName: string },
): Promise<User> {
  const problem = passwordProblem(input.password);
  if (problem) throw new ServiceError("BAD_REQUEST", problem, { details: { issues: [{ path: "password", message: problem }] } });
  return createAccount(deps, input);
}

const emailTaken = () => new ServiceError("CONFLICT", "An account with this email already exists");

/** The fields of a user that may leave the service. */
export function publicUser(user: User) {
  return {
    id: user.id,
    email: user.email,
    fullName: user.fullName,
    tenantId: user.tenantId,
    workspaceId: user.workspaceId,
    plan: user.plan,
    createdAt: user.createdAt,
  };
}
