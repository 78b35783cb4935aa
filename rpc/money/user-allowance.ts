import { unauthorized } from "../auth.js";
import type { UsersRepo } from "../../storage/repos/users.js";
import type { Allowance } from "./allowance.js";

/** The user's plan id (Account and Gateway chat draw on it; docs/interface.md 1: the same allowance as the web chat). */
export async function userPlan(deps: { users: UsersRepo; allowance: Allowance }, userId: string): Promise<string> {
  const user = await deps.users.recent(userId);
  if (!user) throw unauthorized("invalid");
  return deps.allowance.resolve(user.plan).id;
}
