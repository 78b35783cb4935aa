import * as v from "valibot";
import { ServiceError } from "./errors.js";

export interface Issue {
  path: string;
  message: string;
}

/** Parses a method's params; failures are 400 over REST and -32602 over JSON-RPC. */
export function parseParams<S extends v.GenericSchema>(schema: S, raw: unknown): v.InferOutput<S> {
  const result = v.safeParse(schema, raw);
  if (result.success) return result.output;
  const issues: Issue[] = result.issues.map((issue) => ({ path: v.getDotPath(issue) ?? "", message: issue.message }));
  const first = issues[0]!;
  throw new ServiceError("VALIDATION_FAILED", `Invalid request: ${first.path ? `${first.path}: ` : ""}${first.message}`, {
    details: { issues },
  });
}

/** A whole number that may arrive as a query string. */
export const queryInt = (min: number, max: number) =>
  v.pipe(
    v.union([v.pipe(v.string(), v.regex(/^-?\d+$/, "must be an integer"), v.transform(Number)), v.number()]),
    v.integer("must be an integer"),
    v.minValue(min),
    v.maxValue(max),
  );

/** The `request` param of a raw binding (rpc/define.ts RawRequest). */
export const RawRequestInput = v.object({
  method: v.picklist(["GET", "POST", "PUT", "PATCH", "DELETE"]),
  search: v.string(),
  headers: v.record(v.string(), v.string()),
  body: v.optional(v.instance(Uint8Array)),
});

/** A JSON object: not null, not an array (a JSON-RPC message, its params). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * How deep a request body may nest (docs/security.md "Input bounds"). A body is walked by the
 * validators, the dialect readers and the schema translations, several of them recursively: a
 * tool schema nested thousands of levels would overflow the stack. No request of any client
 * comes near it (a JSON Schema of 20 nested objects is about 45 levels).
 */
export const MAX_JSON_DEPTH = 128;

/** Whether a parsed JSON value nests deeper than `max` objects and arrays (walked without recursion). */
export function nestsDeeper(value: unknown, max: number): boolean {
  if (value === null || typeof value !== "object") return false;
  const stack: unknown[] = [value];
  const depths: number[] = [1];
  while (stack.length) {
    const node = stack.pop() as object;
    const depth = depths.pop()!;
    if (depth > max) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (child !== null && typeof child === "object") {
        stack.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}
