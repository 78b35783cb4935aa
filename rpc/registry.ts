import type { AnyMethod } from "./define.js";

export type Registry = Readonly<Record<string, AnyMethod>>;

/** A flat map keyed by method name, with a null prototype; a duplicate name is a bug. */
export function createRegistry(methods: readonly AnyMethod[]): Registry {
  const registry: Record<string, AnyMethod> = Object.create(null);
  for (const method of methods) {
    if (method.name.startsWith("rpc.")) throw new Error(`Method names starting with "rpc." are reserved: ${method.name}`);
    if (registry[method.name]) throw new Error(`Duplicate method: ${method.name}`);
    registry[method.name] = method;
  }
  return Object.freeze(registry);
}
