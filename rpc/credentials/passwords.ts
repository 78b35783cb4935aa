import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";
import { Semaphore } from "./internal/semaphore.js";

/**
 * OWASP's first scrypt configuration: N=2^17, r=8, p=1 (about 128 MiB and half a second here).
 * PASSWORD_SCRYPT_LOG2N may lower N for a test suite that registers hundreds of users; a hash
 * records its own N, so hashes made at another cost still verify.
 */
const PARAMS = { N: 2 ** 17, r: 8, p: 1 };
const KEY_LENGTH = 32;

/** Default of PASSWORD_HASH_CONCURRENCY: half of libuv's default pool of four threads. */
export const DEFAULT_HASH_CONCURRENCY = 2;

/**
 * scrypt runs on libuv's thread pool, which fs also uses: 40 concurrent failed logins used to
 * hold every pool thread for seconds, and an fs-backed read waited behind them (13 s for
 * `GET /auth/keys`). At most this many hashes run at once; the rest queue here, in the event
 * loop, leaving pool threads to storage (docs/benchmarks.md "Login flood").
 */
const hashSlots = new Semaphore(DEFAULT_HASH_CONCURRENCY);

/** Sets how many password hashes may run at once (PASSWORD_HASH_CONCURRENCY; 0 = unbounded). */
export function setHashConcurrency(limit: number): void {
  hashSlots.limit = limit === 0 ? Infinity : limit;
}

/** Sets the cost of new hashes: N = 2^log2N (PASSWORD_SCRYPT_LOG2N, default 17). */
export function setHashCost(log2N: number): void {
  PARAMS.N = 2 ** log2N;
}

/** Hashes running and queued, and the most ever run at once. */
export function hashingStats(): { held: number; waiting: number; peak: number } {
  return hashSlots.stats();
}

export function resetHashingPeak(): void {
  hashSlots.resetPeak();
}

function derive(password: string, salt: Buffer, params: { N: number; r: number; p: number }): Promise<Buffer> {
  const options: ScryptOptions = { ...params, maxmem: 256 * params.N * params.r + 1024 * 1024 };
  return hashSlots.run(
    () =>
      new Promise((resolve, reject) =>
        scrypt(password.normalize("NFKC"), salt, KEY_LENGTH, options, (error, key) => (error ? reject(error) : resolve(key))),
      ),
  );
}

/** `scrypt$N$r$p$salt$hash`, salt and hash in base64url. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMS);
  return ["scrypt", PARAMS.N, PARAMS.r, PARAMS.p, salt.toString("base64url"), key.toString("base64url")].join("$");
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64url");
  const actual = await derive(password, Buffer.from(salt, "base64url"), { N: Number(n), r: Number(r), p: Number(p) });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

let dummy: Promise<string> | undefined;
/** Spends the same time as a real check, so an unknown email is not told apart by timing. */
export async function burnPasswordCheck(password: string): Promise<false> {
  dummy ??= hashPassword("not-a-real-password");
  await verifyPassword(password, await dummy);
  return false;
}

/** A password is accepted at 10+ characters with at least three of: lower, upper, digit, symbol. */
export function passwordProblem(password: string): string | undefined {
  if (password.length < 10) return "Password must be at least 10 characters";
  if (password.length > 256) return "Password must be at most 256 characters";
  const classes = [/[a-z]/, /[A-Z]/, /\d/, /[^A-Za-z0-9]/].filter((re) => re.test(password)).length;
  if (classes < 3) return "Password must mix at least three of: lowercase, uppercase, digits, symbols";
  return undefined;
}
