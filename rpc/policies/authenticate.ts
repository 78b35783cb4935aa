import { admitPrincipal, authenticate as authenticateCaller, requireOperator } from "../auth.js";
import type { Policy } from "./policy.js";

/**
 * Narrows the caller to a principal (rpc/auth.ts): a credential of a kind the method takes,
 * valid, unrevoked and unexpired (401), holding its scopes (403). A caller a gate of the same
 * request already admitted (`facts.authenticated`) is held to this method's kinds and scopes.
 */
export const authenticate: Policy = {
  name: "authenticate",
  stage: "call",
  applies: () => true,
  async run(call, next) {
    const { facts, method } = call;
    call.principal = facts.authenticated
      ? admitPrincipal(facts.authenticated, method.auth)
      : await authenticateCaller(facts.presented, method.auth, call.ports);
    if (call.principal) facts.onAuthenticated?.(call.principal, method);
    return next();
  },
};

/** `auth: {operator: true}`: operators only (the service credential, or a user granted it), else 403. */
export const operatorOnly: Policy = {
  name: "operator",
  stage: "call",
  applies: (method) => method.auth !== "public" && method.auth.operator === true,
  async run(call, next) {
    await requireOperator(call.principal, call.method.auth, call.ports);
    return next();
  },
};
