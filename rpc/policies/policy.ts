import type { Principal } from "../auth.js";
import type { CallFacts } from "../call-facts.js";
import type { AnyMethod } from "../define.js";
import type { CorePorts } from "../ports.js";
import type { CallSurface } from "../surfaces.js";

/** One call as it passes the chain: what the policies read, and what they learn on the way. */
export interface PolicyCall {
  readonly method: AnyMethod;
  readonly facts: CallFacts;
  readonly ports: CorePorts;
  /** Set by `authenticate`; undefined for a public method's anonymous caller. */
  principal?: Principal;
  /** The validated params, for the policies of the `params` stage. */
  params?: unknown;
}

/**
 * A cross-cutting rule of every call, whatever the transport (rpc/policies/chain.ts runs them
 * in their fixed order). `run` does its check and calls `next` for the rest of the chain (a
 * policy that observes the call wraps `next`).
 */
export interface Policy {
  readonly name: string;
  /** `call`: before the params are read; `params`: on the validated params, just before the handler. */
  readonly stage: "call" | "params";
  /** Whether it applies to a method called through a surface: read from the method's declaration or the surface's profile. */
  applies(method: AnyMethod, surface: CallSurface): boolean;
  run(call: PolicyCall, next: () => Promise<unknown>): Promise<unknown>;
}
