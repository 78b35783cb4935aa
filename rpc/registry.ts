import type { AnyMethod } from "./define.js";

/**
 * The registry: every method by name. Typed from the methods it is built of (rpc/modules.ts
 * `ServiceMethod`), so `registry["auth.login"]` is that declaration's typed value; any other
 * name reads as `AnyMethod | undefined` at run time.
 */
export type Registry<M extends AnyMethod = AnyMethod> = { readonly [K in M as K["name"]]: K } & Readonly<Record<string, AnyMethod>>;

/** A flat map keyed by method name, with a null prototype; a duplicate name is a bug. */
export function createRegistry<M extends AnyMethod>(methods: readonly M[]): Registry<M> {
  const registry: Record<string, AnyMethod> = Object.create(null);
  const former = new Set<string>();
  for (const method of methods) {
    if (method.name.startsWith("rpc.")) throw new Error(`Method names starting with "rpc." are reserved: ${method.name}`);
    if (registry[method.name] || former.has(method.name)) throw new Error(`Duplicate method: ${method.name}`);
    registry[method.name] = method;
    for (const name of method.formerNames ?? []) {
      if (registry[name] || former.has(name)) throw new Error(`Duplicate method: ${name} (a former name of ${method.name})`);
      former.add(name);
    }
  }
  return Object.freeze(registry) as Registry<M>;
}
