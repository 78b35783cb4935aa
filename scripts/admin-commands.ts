import { parseArgs } from "node:util";
import { randomBytes } from "node:crypto";
import type { Composition } from "../rpc/compose.js";
import { createAccount, publicUser } from "../rpc/accounts/accounts.js";
import { createKey } from "../rpc/keys/create-key.js";
import { DEFAULT_PLATFORM_SCOPES } from "../rpc/keys/console-keys.js";
import { isServiceError } from "../rpc/errors.js";
import { passwordProblem } from "../rpc/credentials/passwords.js";
import { loadPlans } from "../rpc/money/allowance.js";
import { MICRO_PER_CREDIT } from "../rpc/money/money.js";
import { newId, nowIso } from "../storage/ids.js";
import type { User } from "../storage/repos/users.js";
import { McpServersRepo } from "../storage/repos/mcp-servers.js";

/**
 * Operator commands (issue: "an admin command grants credits and creates workspaces' first
 * keys"). They act on the same storage as the server, through the same repositories, so a
 * running server sees every change at once (fs: same DATA_DIR; redis: same REDIS_URL/PREFIX).
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
  help             This text.`;

/** What the commands reach: the core's storage, secrets and repositories (rpc/compose.ts). */
function adminDeps(composition: Composition) {
  const { config, store, secrets, keyPrefixes, repos } = composition.ports;
  return { config, store, secrets, keyPrefixes, users: repos.users, tenants: repos.tenants, credits: repos.credits, keys: repos.keys };
}
type AdminDeps = ReturnType<typeof adminDeps>;

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

function optionalLimit(flags: Flags, name: string, integer: boolean): number | null {
  const raw = flags[name];
  if (raw === undefined) return null;
  const value = Number(raw);
  if (typeof raw !== "string" || raw.trim() === "" || !Number.isFinite(value) || value < 0 || (integer && !Number.isInteger(value))) {
    throw new AdminError(`--${name} must be a non-negative ${integer ? "whole number" : "number"}, got ${JSON.stringify(raw)}`, 2);
  }
  return value;
}

async function userByEmail(services: AdminDeps, email: string): Promise<User> {
  const user = await services.users.byEmail(email);
  if (!user) throw new AdminError(`No user with email ${email}`);
  return user;
}

async function existingWorkspace(services: AdminDeps, id: string) {
  const workspace = await services.tenants.getWorkspace(id);
  if (!workspace) throw new AdminError(`No workspace ${id} (find a user's workspace with: user --email <e>)`);
  return workspace;
}

const credits = (micro: number) => micro / MICRO_PER_CREDIT;

/** `--header "Name: value"` and `--header-env "Name=ENV_VAR"` as a header map. */
function headerFlags(flags: Flags): Record<string, string> {
  const headers: Record<string, string> = {};
  const token = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
  const list = (value: Flags[string]) => (Array.isArray(value) ? value : []);
  for (const raw of list(flags.header)) {
    const at = raw.indexOf(":");
    const name = raw.slice(0, at).trim();
    if (at < 1 || !token.test(name)) throw new AdminError(`--header must be "Name: value", got ${JSON.stringify(raw.slice(0, 40))}`, 2);
    headers[name] = raw.slice(at + 1).trim();
  }
  for (const raw of list(flags["header-env"])) {
    const [name = "", variable = ""] = raw.split("=", 2).map((part) => part.trim());
    if (!token.test(name) || !variable) throw new AdminError(`--header-env must be "Name=ENV_VAR", got ${JSON.stringify(raw)}`, 2);
    const value = process.env[variable];
    if (value === undefined || value === "") throw new AdminError(`--header-env ${name}: environment variable ${variable} is not set`, 2);
    headers[name] = value;
  }
  if (Object.keys(headers).length > 32) throw new AdminError("at most 32 headers", 2);
  return headers;
}

/** Runs one command; returns what to print (JSON-serialisable). Throws AdminError on bad input. */
export async function runAdmin(args: string[], composition: Composition): Promise<unknown> {
  const services = adminDeps(composition);
  const { command, flags } = parse(args);
  switch (command) {
    case "help":
      return USAGE;

    case "create-user": {
      const email = required(flags, "email");
      const generated = flags.password === undefined;
      const password = generated ? `${randomBytes(12).toString("base64url")}-Aa1` : required(flags, "password");
      const problem = passwordProblem(password);
      if (problem) throw new AdminError(problem, 2);
      try {
        const user = await createAccount(services, { email, password, fullName: typeof flags.name === "string" ? flags.name : "" });
        return { user: publicUser(user), ...(generated ? { password } : {}) };
      } catch (error) {
        if (isServiceError(error)) throw new AdminError(error.message);
        throw error;
      }
    }

    case "user": {
      const user = await userByEmail(services, required(flags, "email"));
      return { user: publicUser(user), balance: credits(await services.credits.balance(user.workspaceId)) };
    }

    case "create-workspace": {
      const user = await userByEmail(services, required(flags, "email"));
      const now = nowIso();
      const workspace = {
        id: newId("ws"),
        tenantId: user.tenantId,
        name: typeof flags.name === "string" && flags.name.trim() ? flags.name.trim() : "Workspace",
        status: "active" as const,
        createdAt: now,
        updatedAt: now,
      };
      await services.tenants.putWorkspace(workspace);
      if (flags.default) await services.users.put({ ...user, workspaceId: workspace.id });
      return { workspace, default: Boolean(flags.default) };
    }

    case "grant-credits": {
      const workspace = await existingWorkspace(services, required(flags, "workspace"));
      const raw = required(flags, "credits");
      const amount = Number(raw);
      const micro = Math.round(amount * MICRO_PER_CREDIT);
      if (!/^\d+(\.\d+)?$/.test(raw) || !Number.isFinite(amount) || micro <= 0 || !Number.isSafeInteger(micro)) {
        throw new AdminError(`--credits must be a positive number (at most 6 decimals), got ${JSON.stringify(raw)}`, 2);
      }
      const balance = await services.credits.grant(workspace.id, micro);
      return { workspace: workspace.id, granted: credits(micro), balance: credits(balance) };
    }

    case "balance": {
      const workspace = await existingWorkspace(services, required(flags, "workspace"));
      const micro = await services.credits.balance(workspace.id);
      return { workspace: workspace.id, balance: credits(micro), microCredits: micro };
    }

    case "create-key": {
      const workspace = await existingWorkspace(services, required(flags, "workspace"));
      const name = required(flags, "name");
      if (name.length > 100) throw new AdminError("--name is at most 100 characters", 2);
      let expiresAt: string | null = null;
      if (flags.expires !== undefined) {
        const at = Date.parse(String(flags.expires));
        if (!Number.isFinite(at) || at <= Date.now()) throw new AdminError("--expires must be an ISO 8601 date in the future", 2);
        expiresAt = new Date(at).toISOString();
      }
      const rpmLimit = optionalLimit(flags, "rpm", true);
      const tpmLimit = optionalLimit(flags, "tpm", true);
      const spendLimit = optionalLimit(flags, "spend", false);
      const tenant = await services.tenants.getTenant(workspace.tenantId);
      if (!tenant) throw new AdminError(`Workspace ${workspace.id} belongs to no tenant`);
      const { record, secret } = await createKey(services, {
        kind: "platform",
        owner: workspace.id,
        userId: tenant.ownerId,
        name,
        scopes: [...DEFAULT_PLATFORM_SCOPES],
        expiresAt,
        rpmLimit,
        tpmLimit,
        spendLimit,
      });
      return {
        id: record.id,
        name: record.name,
        workspace: workspace.id,
        key: secret,
        scopes: record.scopes,
        expiresAt,
        rpmLimit,
        tpmLimit,
        spendLimit,
        note: "The key is shown once; only its SHA-256 is stored.",
      };
    }

    case "set-plan": {
      const user = await userByEmail(services, required(flags, "email"));
      const plan = required(flags, "plan");
      const plans = loadPlans(services.config);
      if (!plans[plan]) throw new AdminError(`Unknown plan ${JSON.stringify(plan)}; configured plans: ${Object.keys(plans).join(", ")}`, 2);
      await services.users.put({ ...user, plan });
      return { user: user.id, email: user.email, plan, previous: user.plan };
    }

    case "grant-operator":
    case "revoke-operator": {
      const user = await userByEmail(services, required(flags, "email"));
      const operator = command === "grant-operator";
      await services.users.put({ ...user, operator });
      return { user: user.id, email: user.email, operator, previous: user.operator === true };
    }

    case "add-mcp-server": {
      const name = required(flags, "name");
      // The same rules as POST /gateway/v1/mcp/servers (rpc/tools/mcp-server-methods.ts).
      if (!/^[A-Za-z0-9][A-Za-z0-9-]{0,47}$/.test(name) || name.toLowerCase() === "vm") throw new AdminError("--name: 1-48 letters, digits or '-' (not `vm`)", 2);
      const url = required(flags, "url");
      if (!/^https?:\/\//i.test(url) || !URL.canParse(url)) throw new AdminError("--url must be an absolute http or https URL", 2);
      const category = typeof flags.category === "string" ? flags.category : "mcp";
      if (!/^[a-z0-9][a-z0-9_-]{0,31}$/.test(category)) throw new AdminError("--category: lowercase letters, digits, _ or -", 2);
      const headers = headerFlags(flags);
      const repo = new McpServersRepo(services.store, services.secrets);
      const record = { name, url, headers, category, tenantId: null, createdBy: "admin", createdAt: nowIso() };
      if (!(await repo.create(record))) throw new AdminError(`An MCP server named ${name} is already shared, or a tenant uses the name`);
      await repo.announce({ op: "added", tenantId: null, name, from: "admin" });
      return { name, url, category, headers: Object.keys(headers), shared: true, createdAt: record.createdAt };
    }

    case "list-mcp-servers": {
      const servers = (await new McpServersRepo(services.store, services.secrets).list()).filter((record) => record.tenantId === null);
      return servers.map((record) => ({ name: record.name, url: record.url, category: record.category, headers: Object.keys(record.headers), createdAt: record.createdAt }));
    }

    case "remove-mcp-server": {
      const name = required(flags, "name");
      const repo = new McpServersRepo(services.store, services.secrets);
      if (!(await repo.get(null, name))) throw new AdminError(`No shared MCP server named ${name}`);
      await repo.remove(null, name);
      await repo.announce({ op: "removed", tenantId: null, name, from: "admin" });
      return { success: true, name };
    }

    default:
      throw new AdminError(`Unknown command ${JSON.stringify(command)}\n\n${USAGE}`, 2);
  }
}
