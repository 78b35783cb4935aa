import type * as v from "valibot";
import type { AuthSpec } from "./auth.js";
import type { AnyMethod, ErrorMap, ErrorsField, HandlerReturn, Method, MethodDef, NoErrors } from "./define.js";
import type { Config } from "./config.js";
import type { DomainExports, Ports } from "./ports.js";

export type { CorePorts, DomainExports, Ports } from "./ports.js";

type MaybePromise<T> = T | Promise<T>;

/**
 * One domain (`rpc/<domain>/`): its methods, declared statically, and how it builds the narrow
 * dependencies its handlers see as `ctx.deps` from the core's ports and earlier domains' exports.
 */
export interface DomainModule<Deps = unknown, M extends AnyMethod = AnyMethod> {
  readonly name: string;
  readonly methods: readonly M[];
  /** Validates the module's configuration before storage opens (a bad document stops the start). */
  check?(config: Config): void;
  init(ports: Ports): MaybePromise<Deps>;
  /** Ports this domain offers the domains above it (rpc/modules.ts order). */
  provides?(deps: Deps): Partial<DomainExports>;
  /** Runs on shutdown, in reverse module order. */
  close?(deps: Deps): MaybePromise<void>;
}

/** A module in the ordered list, whatever its deps. */
// biome-ignore lint/suspicious/noExplicitAny: any deps (a module's deps are contravariant in its init)
export type AnyDomainModule = DomainModule<any>;

/** The methods of a module, with their types (rpc/modules.ts builds the registry's type from them). */
// biome-ignore lint/suspicious/noExplicitAny: matches a module whatever its deps
export type MethodsOf<Module> = Module extends DomainModule<any, infer M> ? M : never;

/** Declares methods of one domain: their handlers get `ctx.deps` typed as the domain's `Deps`. */
export interface Domain<Deps> {
  readonly name: string;
  /** `defineMethod` with this domain's deps: same declaration fields, the same typed method value. */
  method<
    const N extends string,
    TSchema extends v.GenericSchema,
    const A extends AuthSpec,
    O extends v.GenericSchema | undefined = undefined,
    const E extends ErrorMap = NoErrors,
    R extends HandlerReturn<O> = HandlerReturn<O>,
  >(def: MethodDef<N, TSchema, A, O, E, R, Deps> & { errors?: ErrorsField<E> }): Method<N, TSchema, A, O, E, R>;
  /** The module (for `rpc/<domain>/index.ts`), with its methods and init. */
  module<M extends AnyMethod>(spec: Omit<DomainModule<Deps, M>, "name">): DomainModule<Deps, M>;
}

/** `const chat = domain<ChatDeps>("chat"); chat.method({...})`. */
export function domain<Deps>(name: string): Domain<Deps> {
  return {
    name,
    method(def) {
      return { ...(def as unknown as AnyMethod), domain: name } as never;
    },
    module(spec) {
      for (const method of spec.methods) {
        if (method.domain !== name)
          throw new Error(`Method ${method.name} is declared by domain ${method.domain ?? "(none)"}, listed in ${name}`);
      }
      return { name, ...spec };
    },
  };
}

/** The named members of `from`, read once (repositories are built when first read). */
export function pick<T extends object, K extends keyof T>(from: T, keys: readonly K[]): Pick<T, K> {
  const out = {} as Pick<T, K>;
  for (const key of keys) out[key] = from[key];
  return out;
}
