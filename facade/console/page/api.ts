/**
 * The page's only way to the service: the console endpoints under /api, with the HttpOnly
 * session cookie the browser attaches by itself (same origin). Nothing is kept in
 * localStorage or the URL; a secret lives in component state until the user dismisses it.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

let onExpired: (() => void) | undefined;

/** Called once when a signed-in call answers 401: the session ended or was revoked. */
export function whenSessionEnds(listener: () => void): void {
  onExpired = listener;
}

type Query = Record<string, string | undefined>;

export async function api<T>(
  method: "GET" | "POST" | "PATCH" | "DELETE",
  path: string,
  options: { body?: unknown; query?: Query; signIn?: boolean } = {},
): Promise<T> {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(options.query ?? {})) if (value !== undefined && value !== "") search.set(name, value);
  const url = `/api${path}${search.size ? `?${search}` : ""}`;
  const init: RequestInit = { method, credentials: "same-origin", headers: { accept: "application/json" } };
  if (options.body !== undefined) {
    init.headers = { ...init.headers, "content-type": "application/json" };
    init.body = JSON.stringify(options.body);
  }
  let response: Response;
  try {
    response = await fetch(url, init);
  } catch {
    throw new ApiError(0, "The service cannot be reached; check that it is running");
  }
  const text = await response.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  if (!response.ok) {
    const error = (body as { error?: { message?: string } | string } | undefined)?.error;
    const message = typeof error === "string" ? error : (error?.message ?? `Request failed (${response.status})`);
    if (response.status === 401 && !options.signIn) onExpired?.();
    throw new ApiError(response.status, message);
  }
  return body as T;
}

export interface User {
  id: string;
  email: string;
  fullName: string;
  tenantId: string;
  workspaceId: string;
}

export interface Session {
  user: User;
  expiresAt: string;
  operator: boolean;
}

export interface Workspace {
  id: string;
  tenantId: string;
  name: string;
  status: string;
  creditBalance: number;
  keyCount: number;
}

export interface ConsoleKey {
  id: string;
  name: string;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  scopes: string[];
  spendLimit: number | null;
  rpmLimit: number | null;
  tpmLimit: number | null;
}

export interface UsageRow {
  day?: string;
  model?: string;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  credits: number;
}

/** Micro-credits as credits, e.g. 12.5. */
export function credits(micro: number): string {
  return (micro / 1_000_000).toLocaleString("en", { maximumFractionDigits: 6 });
}

export function when(value: string | null | undefined, empty = "never"): string {
  if (!value) return empty;
  return new Date(value).toLocaleString("en", { dateStyle: "medium", timeStyle: "short" });
}

const early = new Map<string, Promise<unknown>>();

/**
 * Starts the first screen's reads as the script starts, in parallel (session, workspaces,
 * the default workspace's keys) instead of one after the other; `firstGet` hands each answer
 * to its component once. A read that failed (not signed in yet) is simply made again.
 */
export function preload(paths: string[]): void {
  for (const path of paths) {
    const pending = api("GET", path, { signIn: true });
    pending.catch(() => undefined);
    early.set(path, pending);
  }
}

export function firstGet<T>(path: string, options: { signIn?: boolean } = {}): Promise<T> {
  const pending = early.get(path) as Promise<T> | undefined;
  early.delete(path);
  return pending ? pending.catch(() => api<T>("GET", path, options)) : api<T>("GET", path, options);
}
