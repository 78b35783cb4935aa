import type { AuthSpec } from "./auth.js";
import type { AnyMethod, CallContext, ErrorDecl, Fail } from "./define.js";
import { ERROR_TABLE, ServiceError, isServiceError, type ErrorCode } from "./errors.js";
import { budgetOf } from "./policies/rate-limit.js";
import type { CallSurface } from "./surfaces.js";

/**
 * A method's errors are one list (docs/architecture.md "Typed declarations"): the codes it
 * declares (`errors: { NOT_FOUND: {}, … }`) and those its auth, input and policies imply. That
 * list is its OpenAPI error responses (facade/openapi.ts), what `ctx.fail` accepts (typed in
 * rpc/define.ts `RaisableCode`) and what the dispatcher checks a handler's errors against in
 * test runs.
 */
export type ErrorOrigin = "declared" | "auth" | "input" | "policy";

export interface ContractError {
  code: ErrorCode;
  status: number;
  origin: ErrorOrigin;
  /** The declared meaning for this method, if the declaration gives one. */
  message?: string;
}

/** What authentication can answer for this spec (rpc/auth.ts); the same rule as `ImpliedCode` in rpc/define.ts. */
export function authErrors(auth: AuthSpec): ErrorCode[] {
  if (auth === "public") return [];
  const codes: ErrorCode[] = ["UNAUTHORIZED"];
  if (auth.scopes?.length) codes.push(auth.scopeError ?? "FORBIDDEN");
  if (auth.operator || auth.keyRefusal !== undefined) codes.push("FORBIDDEN");
  return codes;
}

/**
 * What the policies can answer (rpc/policies/): a request budget, the method's own or its
 * surface's (rpc/surfaces.ts), or the telemetry ingest limit. Without a surface, the method's own.
 */
export function policyErrors(method: AnyMethod, surface?: CallSurface): ErrorCode[] {
  const budget = surface === undefined ? method.policies?.rateLimit : budgetOf(method, surface);
  return method.policies?.ingest || (method.auth !== "public" && budget) ? ["RATE_LIMITED"] : [];
}

/**
 * Every error of a method's contract, each code once, declared ones first. `hasParams: false`
 * (a method whose input has no fields) leaves validation out, as OpenAPI does; `surface` adds
 * that surface's request budget.
 */
export function contractErrors(method: AnyMethod, options: { hasParams?: boolean; surface?: CallSurface } = {}): ContractError[] {
  const out = new Map<ErrorCode, ContractError>();
  const add = (code: ErrorCode, origin: ErrorOrigin, declared?: ErrorDecl) => {
    if (out.has(code)) return;
    out.set(code, {
      code,
      status: declared?.status ?? ERROR_TABLE[code].status,
      origin,
      ...(declared?.message === undefined ? {} : { message: declared.message }),
    });
  };
  for (const [code, declared] of Object.entries(method.errors ?? {}) as [ErrorCode, ErrorDecl | undefined][])
    add(code, "declared", declared);
  for (const code of authErrors(method.auth)) add(code, "auth");
  if (options.hasParams !== false) add("VALIDATION_FAILED", "input");
  for (const code of policyErrors(method, options.surface)) add(code, "policy");
  return [...out.values()];
}

/**
 * The code of an error a handler raised that its method's contract does not list, if any.
 * `INTERNAL` (an unexpected error, masked) is in every contract.
 */
export function undeclaredCode(method: AnyMethod, error: unknown, surface?: CallSurface): ErrorCode | undefined {
  if (!isServiceError(error) || error.code === "INTERNAL") return undefined;
  return contractErrors(method, { surface }).some((entry) => entry.code === error.code) ? undefined : error.code;
}

/** "NOT_FOUND" → "Not found": the message of a raised code nobody worded. */
function wording(code: ErrorCode): string {
  const text = code.toLowerCase().replace(/_/g, " ");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** `ctx.fail` of a method: throws the code's `ServiceError`, worded as given, else as declared. */
export function failFor(method: AnyMethod): Fail<ErrorCode> {
  return (code, message, options) => {
    throw new ServiceError(code, message ?? method.errors?.[code]?.message ?? wording(code), options);
  };
}

/**
 * Runs a handler and tells `report` about an error it raised outside its method's contract
 * (the dispatcher does this in test runs; the error itself goes on unchanged). Errors of a
 * stream after it started are not seen here.
 */
export async function runChecked(
  method: AnyMethod,
  params: unknown,
  ctx: CallContext,
  surface: CallSurface,
  report: (code: ErrorCode) => void,
): Promise<unknown> {
  try {
    return await method.handler(params, ctx);
  } catch (error) {
    const code = undeclaredCode(method, error, surface);
    if (code !== undefined) report(code);
    throw error;
  }
}
