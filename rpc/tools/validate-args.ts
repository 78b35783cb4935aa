import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { ServiceError } from "../errors.js";
import type { Issue } from "../validate.js";
import type { JsonSchema } from "./types.js";

// ajv-formats is CommonJS with `exports.default`; under NodeNext the default import is the module.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (
  ajv: Ajv | Ajv2020,
) => void;

/**
 * Tool schemas come from many places (built-ins, upstream MCP servers, VMs): draft-07 and
 * 2020-12 both occur, and upstream schemas carry keywords ajv does not know, so strict mode
 * is off and the dialect is picked from `$schema`.
 */
const draft07 = new Ajv({ strict: false, allErrors: true });
const draft2020 = new Ajv2020({ strict: false, allErrors: true });
addFormats(draft07);
addFormats(draft2020);

// Compiled validators per schema object: catalogs hand out the same objects on every list.
const compiled = new WeakMap<JsonSchema, ValidateFunction | null>();

function compile(schema: JsonSchema): ValidateFunction | null {
  if (compiled.has(schema)) return compiled.get(schema)!;
  const { $schema, $id: _id, ...rest } = schema as { $schema?: unknown; $id?: unknown };
  const ajv = typeof $schema === "string" && /2019-09|2020-12/.test($schema) ? draft2020 : draft07;
  let validate: ValidateFunction | null;
  try {
    validate = ajv.compile(rest);
  } catch {
    // A schema ajv cannot compile is the source's problem, not the caller's: the source (an
    // upstream server or a VM) still validates its own input.
    validate = null;
  }
  compiled.set(schema, validate);
  return validate;
}

function toIssue(error: ErrorObject): Issue {
  const base = error.instancePath.replace(/^\//, "").replaceAll("/", ".");
  if (error.keyword === "required") {
    const missing = (error.params as { missingProperty: string }).missingProperty;
    return { path: base ? `${base}.${missing}` : missing, message: "is required" };
  }
  if (error.keyword === "additionalProperties") {
    const extra = (error.params as { additionalProperty: string }).additionalProperty;
    return { path: base ? `${base}.${extra}` : extra, message: "is not an allowed property" };
  }
  return { path: base, message: error.message ?? "is invalid" };
}

/** The issues of `args` against a tool's JSON Schema; empty when they conform. */
export function schemaIssues(schema: JsonSchema, args: unknown): Issue[] {
  if (typeof args !== "object" || args === null || Array.isArray(args)) return [{ path: "", message: "args must be a JSON object" }];
  const validate = compile(schema);
  if (!validate || validate(args)) return [];
  return (validate.errors ?? []).map(toIssue);
}

/** Throws VALIDATION_FAILED (400 over REST) with the issues when `args` break the schema. */
export function assertArgs(toolName: string, schema: JsonSchema, args: unknown): asserts args is Record<string, unknown> {
  const issues = schemaIssues(schema, args);
  if (issues.length === 0) return;
  const first = issues[0]!;
  throw new ServiceError("VALIDATION_FAILED", `Invalid arguments for ${toolName}: ${first.path ? `${first.path} ` : ""}${first.message}`, {
    details: { issues },
  });
}
