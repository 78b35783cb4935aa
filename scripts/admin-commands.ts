import { parseArgs } from "node:util";
import { randomBytes } from "node:crypto";
import type { Composition } from "../rpc/compose.js";
import type { MethodParams, MethodResult } from "../rpc/define.js";
import { callFacts } from "../rpc/dispatcher.js";
import type { ServiceMethod } from "../rpc/modules.js";
import { operatorUsersCreate, operatorUsersGet, operatorUsersUpdate } from "../rpc/accounts/operator-methods.js";
import { operatorKeysCreate } from "../rpc/keys/operator-methods.js";
import { operatorWorkspacesCreate } from "../rpc/workspaces/operator-methods.js";
import { operatorBalances, operatorCreditsGrant } from "../rpc/billing/credit-methods.js";
import { operatorMcpServersShare, operatorMcpServersShared, operatorMcpServersUnshare } from "../rpc/tools/shared-server-methods.js";
import { operatorOAuthClientsAdd, operatorOAuthClientsList, operatorOAuthClientsRemove } from "../rpc/oauth/client-methods.js";
import { ADMIN_PRINCIPAL } from "../rpc/auth.js";
import { isServiceError } from "../rpc/errors.js";
import { MICRO_PER_CREDIT } from "../rpc/money/money.js";

/**
 * Operator commands (docs/console-and-admin.md). Each one dispatches methods of the service's
 * own dispatcher (`operator.*`) as the local administrator (`ADMIN_PRINCIPAL`, an operator), in
 * a composition of the same storage as the server, so every rule, event, cap and log line is
 * the one the HTTP operator routes have, and a running server sees every change at once (fs:
 * same DATA_DIR; redis: same REDIS_URL/PREFIX). This file only reads flags, calls, and prints.
 */
/** A mistake in the command line or its target; the CLI prints the message and exits non-zero. */
export class AdminError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = "AdminError";
  }
}

export const USAGE = `Usage: npm run admin -- <command> [options]

Commands:
  create-user      --email <e> [--name <full name>] [--password <p>]
                   A user with a personal tenant and workspace (as Gateway register does).
                   Without --password one is generated and printed once.
  user             --email <e>                Show a user, their workspace and its credit balance.
  create-workspace --email <e> [--name <n>] [--default]
                   A new workspace in the user's tenant; --default makes the console use it.
  grant-credits    --workspace <id> --credits <n>   Add n credits (decimals allowed).
  balance          --workspace <id>           The workspace's credit balance.
  create-key       --workspace <id> --name <n> [--rpm <n>] [--tpm <n>] [--spend <credits>] [--expires <ISO date>]
                   A platform key (scope chat:write); the plaintext is printed once.
  set-plan         --email <e> --plan <id>    The user's Account API plan (one of PLANS_JSON, default free|pro).
  grant-operator   --email <e>                The user may publish releases and edit the model registry.
  revoke-operator  --email <e>                Takes that back.
  add-mcp-server   --name <n> --url <u> [--category <c>] [--header "Name: value"]… [--header-env "Name=ENV_VAR"]…
                   An upstream MCP server shared with every tenant (tenants register their own
                   at POST /gateway/v1/mcp/servers). --header-env reads a value from the
                   environment, so a secret stays out of the command line. Values are encrypted
                   at rest with DATA_ENCRYPTION_SECRET; running servers connect it (Redis: at
                   once; fs: within 15 s).
  list-mcp-servers                            The shared servers (header names only).
  remove-mcp-server --name <n>                Removes a shared server from every tenant's catalog.
  add-oauth-client --name <n> --redirect-uri <uri>… [--native] [--confidential]
                   An OAuth client of the MCP authorization server, for an application that is
                   configured with a client id (docs/mcp.md "Clients"). --confidential gives it a
                   secret, printed once.
  list-oauth-clients                          The OAuth clients operators registered.
  remove-oauth-client --client-id <id>        Removes one: it can no longer authorize or refresh.
  help             This text.`;

type Flags = Record<string, string | boolean | string[] | undefined>;

function parse(args: string[]): { command: string; flags: Flags } {
  const [command, ...rest] = args;
  if (!command || command === "help" || command === "--help" || command === "-h") return { command: "help", flags: {} };
  try {
    const { values } = parseArgs({
      args: rest,
      strict: true,
      allowPositionals: false,
      options: {
        email: { type: "string" },
        name: { type: "string" },
        password: { type: "string" },
        workspace: { type: "string" },
        credits: { type: "string" },
        rpm: { type: "string" },
        tpm: { type: "string" },
        spend: { type: "string" },
        expires: { type: "string" },
        plan: { type: "string" },
        default: { type: "boolean" },
        url: { type: "string" },
        category: { type: "string" },
        header: { type: "string", multiple: true },
        "header-env": { type: "string", multiple: true },
        "redirect-uri": { type: "string", multiple: true },
        "client-id": { type: "string" },
        native: { type: "boolean" },
        confidential: { type: "boolean" },
      },
    });
    return { command, flags: values };
  } catch (error) {
    throw new AdminError(`${(error as Error).message}\n\n${USAGE}`, 2);
  }
}

function required(flags: Flags, name: string): string {
  const value = flags[name];
  if (typeof value !== "string" || value.trim() === "") throw new AdminError(`--${name} is required\n\n${USAGE}`, 2);
  return value.trim();
}

const optional = (flags: Flags, name: string): string | undefined =>
  typeof flags[name] === "string" ? (flags[name] as string) : undefined;

/** A decimal number as written on the command line; its range is the method's to check. */
function numberFlag(flags: Flags, name: string): number;
function numberFlag(flags: Flags, name: string, mayBeAbsent: true): number | null;
function numberFlag(flags: Flags, name: string, mayBeAbsent = false): number | null {
  if (mayBeAbsent && flags[name] === undefined) return null;
  const raw = required(flags, name);
  if (!/^-?\d+(\.\d+)?$/.test(raw)) throw new AdminError(`--${name} must be a number, got ${JSON.stringify(raw)}`, 2);
  return Number(raw);
}

/** A date the way `Date` reads it, handed on as an ISO 8601 timestamp (the method checks it is in the future). */
function dateFlag(flags: Flags, name: string): string | null {
  if (flags[name] === undefined) return null;
  const at = Date.parse(required(flags, name));
  if (!Number.isFinite(at)) throw new AdminError(`--${name} must be an ISO 8601 date`, 2);
  return new Date(at).toISOString();
}

/** `--header "Name: value"` and `--header-env "Name=ENV_VAR"` as a header map (names and count are the method's to check). */
function headerFlags(flags: Flags): Record<string, string> {
  const headers: Record<string, string> = {};
  const list = (value: Flags[string]) => (Array.isArray(value) ? value : []);
  for (const raw of list(flags.header)) {
    const at = raw.indexOf(":");
    if (at < 1) throw new AdminError(`--header must be "Name: value", got ${JSON.stringify(raw.slice(0, 40))}`, 2);
    headers[raw.slice(0, at).trim()] = raw.slice(at + 1).trim();
  }
  for (const raw of list(flags["header-env"])) {
    const [name = "", variable = ""] = raw.split("=", 2).map((part) => part.trim());
    if (!name || !variable) throw new AdminError(`--header-env must be "Name=ENV_VAR", got ${JSON.stringify(raw)}`, 2);
    const value = process.env[variable];
    if (value === undefined || value === "") throw new AdminError(`--header-env ${name}: environment variable ${variable} is not set`, 2);
    headers[name] = value;
  }
  return headers;
}

const credits = (micro: number) => micro / MICRO_PER_CREDIT;

/** The flag that fills a method's param, for error messages in the command line's words. */
const FLAG_OF: Record<string, string> = {
  workspaceId: "workspace",
  fullName: "name",
  rpmLimit: "rpm",
  tpmLimit: "tpm",
  spendLimit: "spend",
  expiresAt: "expires",
  headers: "header",
};

/** A refused call in the command line's terms: bad input exits 2 (with the flag named), anything else 1. */
function adminError(error: unknown, notFound?: string): unknown {
  if (!isServiceError(error)) return error;
  if (error.code === "VALIDATION_FAILED" || error.code === "BAD_REQUEST") {
    const issue = (error.details as { issues?: { path: string; message: string }[] } | undefined)?.issues?.[0];
    const param = issue?.path.split(".")[0];
    return new AdminError(issue && param ? `--${FLAG_OF[param] ?? param}: ${issue.message}` : error.message, 2);
  }
  if (error.code === "NOT_FOUND" && notFound) return new AdminError(notFound);
  return new AdminError(error.message);
}

const noWorkspace = (id: string) => `No workspace ${id} (find a user's workspace with: user --email <e>)`;

/**
 * Dispatches one method as the local administrator: the dispatcher's whole path (lookup, the
 * policy chain with its operator check and its log line for the call, validation, the handler
 * with its domain's deps), as for an HTTP call.
 */
async function call<M extends ServiceMethod>(
  composition: Composition,
  method: M,
  params: MethodParams<M>,
  notFound?: string,
): Promise<MethodResult<M>> {
  try {
    return await composition.dispatcher.call(
      method,
      params,
      callFacts({ surface: "rpc", transport: "direct", ip: "local", authenticated: ADMIN_PRINCIPAL }),
    );
  } catch (error) {
    throw adminError(error, notFound);
  }
}

/** Runs one command; returns what to print (JSON-serialisable). Throws AdminError on bad input or a refused call. */
export async function runAdmin(args: string[], composition: Composition): Promise<unknown> {
  const { command, flags } = parse(args);
  switch (command) {
    case "help":
      return USAGE;

    case "create-user": {
      const email = required(flags, "email");
      const generated = flags.password === undefined;
      const password = generated ? `${randomBytes(12).toString("base64url")}-Aa1` : required(flags, "password");
      const { user } = await call(composition, operatorUsersCreate, { email, password, fullName: optional(flags, "name") });
      return { user, ...(generated ? { password } : {}) };
    }

    case "user": {
      const { user } = await call(composition, operatorUsersGet, { email: required(flags, "email") });
      const { operator: _operator, ...shown } = user;
      const { workspaces } = await call(composition, operatorBalances, { workspaceId: user.workspaceId }, noWorkspace(user.workspaceId));
      return { user: shown, balance: credits(workspaces[0]!.creditBalance) };
    }

    case "create-workspace":
      return call(composition, operatorWorkspacesCreate, {
        email: required(flags, "email"),
        name: optional(flags, "name"),
        default: flags.default === true,
      });

    case "grant-credits": {
      const workspaceId = required(flags, "workspace");
      const amount = numberFlag(flags, "credits");
      const answer = await call(composition, operatorCreditsGrant, { workspaceId, credits: amount }, noWorkspace(workspaceId));
      return { workspace: answer.workspaceId, granted: credits(answer.granted), balance: credits(answer.creditBalance) };
    }

    case "balance": {
      const workspaceId = required(flags, "workspace");
      const [workspace] = (await call(composition, operatorBalances, { workspaceId }, noWorkspace(workspaceId))).workspaces;
      return { workspace: workspace!.workspaceId, balance: credits(workspace!.creditBalance), microCredits: workspace!.creditBalance };
    }

    case "create-key": {
      const workspaceId = required(flags, "workspace");
      const key = await call(
        composition,
        operatorKeysCreate,
        {
          workspaceId,
          name: required(flags, "name"),
          expiresAt: dateFlag(flags, "expires"),
          rpmLimit: numberFlag(flags, "rpm", true),
          tpmLimit: numberFlag(flags, "tpm", true),
          spendLimit: numberFlag(flags, "spend", true),
        },
        noWorkspace(workspaceId),
      );
      return {
        id: key.id,
        name: key.name,
        workspace: key.workspaceId,
        key: key.key,
        scopes: key.scopes,
        expiresAt: key.expiresAt,
        rpmLimit: key.rpmLimit,
        tpmLimit: key.tpmLimit,
        spendLimit: key.spendLimit,
        note: "The key is shown once; only its SHA-256 is stored.",
      };
    }

    case "set-plan": {
      const { user, previous } = await call(composition, operatorUsersUpdate, {
        email: required(flags, "email"),
        plan: required(flags, "plan"),
      });
      return { user: user.id, email: user.email, plan: user.plan, previous: previous.plan };
    }

    case "grant-operator":
    case "revoke-operator": {
      const operator = command === "grant-operator";
      const { user, previous } = await call(composition, operatorUsersUpdate, { email: required(flags, "email"), operator });
      return { user: user.id, email: user.email, operator, previous: previous.operator };
    }

    case "add-mcp-server":
      return call(composition, operatorMcpServersShare, {
        name: required(flags, "name"),
        url: required(flags, "url"),
        category: optional(flags, "category"),
        headers: headerFlags(flags),
      });

    case "list-mcp-servers":
      return (await call(composition, operatorMcpServersShared, {})).servers;

    case "remove-mcp-server":
      return call(composition, operatorMcpServersUnshare, { name: required(flags, "name") });

    case "add-oauth-client":
      return call(composition, operatorOAuthClientsAdd, {
        name: required(flags, "name"),
        redirectUris: Array.isArray(flags["redirect-uri"]) ? flags["redirect-uri"] : [],
        applicationType: flags.native === true ? "native" : "web",
        confidential: flags.confidential === true,
      });

    case "list-oauth-clients":
      return (await call(composition, operatorOAuthClientsList, {})).clients;

    case "remove-oauth-client":
      return call(composition, operatorOAuthClientsRemove, { clientId: required(flags, "client-id") });

    default:
      throw new AdminError(`Unknown command ${JSON.stringify(command)}\n\n${USAGE}`, 2);
  }
}
