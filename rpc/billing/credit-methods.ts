import * as v from "valibot";
import { ServiceError } from "../errors.js";
import { queryInt } from "../validate.js";
import { MICRO_PER_CREDIT } from "../money/money.js";
import { publicUser } from "../accounts/accounts.js";
import type { Workspace } from "../../storage/repos/tenants.js";
import { recordAudit } from "../audit.js";
import { billingDomain, type BillingDeps } from "./deps.js";

const OPERATORS = { kinds: ["session", "console", "service"], operator: true } as const;
const WorkspaceId = v.pipe(v.string("workspaceId must be a string"), v.trim(), v.minLength(1, "workspaceId is required"), v.maxLength(128));

const BalanceView = v.object({
  workspaceId: v.string(),
  name: v.string(),
  tenantId: v.string(),
  status: v.string(),
  creditBalance: v.pipe(v.number(), v.description("Micro-credits (1 credit = 1,000,000)")),
});

async function balanceView(deps: BillingDeps, workspace: Workspace) {
  return {
    workspaceId: workspace.id,
    name: workspace.name,
    tenantId: workspace.tenantId,
    status: workspace.status,
    creditBalance: await deps.credits.balance(workspace.id),
  };
}

async function existing(deps: BillingDeps, id: string): Promise<Workspace> {
  const workspace = await deps.tenants.getWorkspace(id);
  if (!workspace) throw new ServiceError("NOT_FOUND", `Workspace not found: ${id}`);
  return workspace;
}

export const operatorBalances = billingDomain.method({
  name: "operator.balances",
  summary:
    "Operators: workspaces with their credit balances in micro-credits: a user's (by `email`), one (by " +
    "`workspaceId`), or without either every workspace in id order, `limit` at a time after `after` (`nextAfter` " +
    "is set while more remain).",
  input: v.pipe(
    v.object({
      email: v.optional(v.pipe(v.string("email must be a string"), v.trim(), v.minLength(1, "email is required"), v.maxLength(254))),
      workspaceId: v.optional(WorkspaceId),
      limit: v.optional(queryInt(1, 200), 50),
      after: v.optional(WorkspaceId),
    }),
    v.check((input) => !(input.email && input.workspaceId), "Give email or workspaceId, not both"),
  ),
  auth: OPERATORS,
  output: v.object({
    user: v.optional(v.object({ id: v.string(), email: v.string() })),
    workspaces: v.array(BalanceView),
    nextAfter: v.optional(v.pipe(v.string(), v.description("Pass as `after` for the next page of the overview"))),
  }),
  errors: { NOT_FOUND: {}, VALIDATION_FAILED: {} },
  http: [
    { surface: "gateway", method: "GET", path: "/operator/balances" },
    { surface: "console", method: "GET", path: "/operator/balances" },
  ],
  async handler(params, ctx) {
    const { deps } = ctx;
    if (params.workspaceId) return { workspaces: [await balanceView(deps, await existing(deps, params.workspaceId))] };
    if (!params.email) {
      const page = await deps.tenants.allWorkspaces({ after: params.after, limit: params.limit });
      const workspaces = await Promise.all(page.workspaces.map((workspace) => balanceView(deps, workspace)));
      return page.more ? { workspaces, nextAfter: page.workspaces.at(-1)!.id } : { workspaces };
    }
    const user = await deps.users.byEmail(params.email!);
    if (!user) throw new ServiceError("NOT_FOUND", `No user with email ${params.email}`);
    const workspaces = await deps.tenants.workspacesOf(user.tenantId, [user.workspaceId]);
    const { id, email } = publicUser(user);
    return { user: { id, email }, workspaces: await Promise.all(workspaces.map((workspace) => balanceView(deps, workspace))) };
  },
});

export const operatorCreditsGrant = billingDomain.method({
  name: "operator.credits.grant",
  summary: "Operators: add `credits` (up to 6 decimals) to a workspace's balance; answers the new balance in micro-credits.",
  input: v.object({
    workspaceId: WorkspaceId,
    credits: v.pipe(
      v.number("credits must be a number"),
      v.finite("credits must be finite"),
      v.gtValue(0, "credits must be positive"),
      v.maxValue(1e9, "credits is at most 1,000,000,000 per grant"),
      v.check(
        (value) => Math.abs(value * MICRO_PER_CREDIT - Math.round(value * MICRO_PER_CREDIT)) < 1e-6,
        "credits has at most 6 decimals",
      ),
    ),
  }),
  auth: OPERATORS,
  output: v.object({ ...BalanceView.entries, granted: v.pipe(v.number(), v.description("Micro-credits added")) }),
  errors: { NOT_FOUND: {}, VALIDATION_FAILED: {} },
  http: [
    { surface: "gateway", method: "POST", path: "/operator/credits" },
    { surface: "console", method: "POST", path: "/operator/credits" },
  ],
  async handler(params, ctx) {
    const workspace = await existing(ctx.deps, params.workspaceId);
    const micro = Math.round(params.credits * MICRO_PER_CREDIT);
    await ctx.deps.credits.grant(workspace.id, micro);
    ctx.deps.log.info({
      requestId: ctx.requestId,
      event: "credits.granted",
      workspaceId: workspace.id,
      microCredits: micro,
      by: ctx.principal.userId,
    });
    // The workspace's tenant sees who granted it credits (docs/audit.md).
    await recordAudit(ctx, {
      action: "credits.granted",
      target: workspace.id,
      tenantId: workspace.tenantId,
      changes: { microCredits: micro },
    });
    return { ...(await balanceView(ctx.deps, workspace)), granted: micro };
  },
});

/**
 * What `npm run admin -- user` and `grant-credits` do, for operators (`grant-operator`) from
 * the console or a Gateway session: look a user's workspaces up with their balances, and
 * grant credits to any workspace.
 */
export const creditMethods = [operatorBalances, operatorCreditsGrant];
