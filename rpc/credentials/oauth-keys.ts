import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK } from "jose";
import type { OAuthKeySet, OAuthKeysRepo, OAuthSigningKey, PrivateJwk } from "../../storage/repos/oauth-keys.js";

export interface KeyRingOptions {
  /** How long one key signs access tokens (OAUTH_SIGNING_KEY_DAYS). */
  rotationMs: number;
  /** The longest life of a token it signs (OAUTH_ACCESS_TOKEN_SECONDS): a key stays published that long after it stops signing. */
  tokenLifetimeMs: number;
  /** How often the shared key set is read again (and rotated when due). Default one minute. */
  refreshMs?: number;
  now?: () => number;
}

/** The keys as one instance uses them: the signing key now, and every published one. */
export interface KeyRingView {
  version: number;
  signing: OAuthSigningKey;
  published: OAuthSigningKey[];
}

/** The public half of a key, as the JWKS lists it. */
export function publicJwk(key: OAuthSigningKey): JWK {
  const { d: _private, ...rest } = key.jwk as JWK;
  return { ...rest, kid: key.kid, alg: key.alg, use: "sig" };
}

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

/**
 * The authorization server's signing keys and their rotation (docs/mcp.md "Signing keys"),
 * shared by every instance through one stored key set:
 *
 * - a key signs for `rotationMs`; its successor is made while it still signs (a day ahead, or
 *   half the period when shorter) and published in the JWKS at once, so a resource server that
 *   caches the JWKS knows it before the first token it signs;
 * - a key stays published `tokenLifetimeMs` (plus five minutes) after it stopped signing, then
 *   it is dropped: no live token needs it any more;
 * - whichever instance first sees a change is due makes it by compare-and-set; the others read
 *   the result.
 */
export class OAuthKeyRing {
  readonly #repo: OAuthKeysRepo;
  readonly #options: Required<Omit<KeyRingOptions, "now">> & { now: () => number };
  #view: KeyRingView | undefined;
  #loadedAt = 0;
  #loading: Promise<KeyRingView> | undefined;
  #lastForcedAt = 0;

  constructor(repo: OAuthKeysRepo, options: KeyRingOptions) {
    this.#repo = repo;
    this.#options = { refreshMs: MINUTE, now: Date.now, ...options };
  }

  /** The key set, read again (and rotated when due) once `refreshMs` passed. */
  current(): Promise<KeyRingView> {
    const now = this.#options.now();
    if (this.#view && now - this.#loadedAt < this.#options.refreshMs && this.#view.signing.signsUntil > now)
      return Promise.resolve(this.#view);
    return this.#reload();
  }

  /**
   * The public key of `kid`, for verifying a token. An unknown kid reads the key set again (at
   * most once every five seconds): another instance may have rotated.
   */
  async verificationKey(kid: string): Promise<OAuthSigningKey | undefined> {
    let view = await this.current();
    let key = view.published.find((entry) => entry.kid === kid);
    const now = this.#options.now();
    if (!key && now - this.#lastForcedAt > 5000) {
      this.#lastForcedAt = now;
      view = await this.#reload();
      key = view.published.find((entry) => entry.kid === kid);
    }
    return key;
  }

  #reload(): Promise<KeyRingView> {
    this.#loading ??= this.#load().finally(() => {
      this.#loading = undefined;
    });
    return this.#loading;
  }

  async #load(): Promise<KeyRingView> {
    let set = await this.#repo.get();
    // At most a key or two are due at once (the first one; a successor): a few rounds settle it.
    for (let round = 0; round < 4 && needsChange(set, this.#options.now(), this.#options); round++) {
      const fresh = await newKey();
      set = (await this.#repo.change((current) => plan(current, this.#options.now(), this.#options, fresh))) ?? set;
    }
    if (!set) throw new Error("The authorization server has no signing key");
    const now = this.#options.now();
    const published = set.keys.filter((key) => key.retiresAt > now);
    const signing = signingKeyOf(published, now);
    if (!signing) throw new Error("The authorization server has no signing key for now");
    this.#view = { version: set.version, signing, published };
    this.#loadedAt = now;
    return this.#view;
  }
}

type Schedule = Pick<KeyRingOptions, "rotationMs" | "tokenLifetimeMs">;

/** The key that signs at `now`: the newest of those whose period holds it. */
function signingKeyOf(keys: readonly OAuthSigningKey[], now: number): OAuthSigningKey | undefined {
  return keys.filter((key) => key.signsFrom <= now && now < key.signsUntil).sort((a, b) => b.signsFrom - a.signsFrom)[0];
}

function leadOf(schedule: Schedule): number {
  return Math.min(DAY, schedule.rotationMs / 2);
}

function needsChange(set: OAuthKeySet | undefined, now: number, schedule: Schedule): boolean {
  if (!set || !signingKeyOf(set.keys, now)) return true;
  if (set.keys.some((key) => key.retiresAt <= now)) return true;
  const last = Math.max(...set.keys.map((key) => key.signsUntil));
  return last - now <= leadOf(schedule);
}

/**
 * The next key set: retired keys dropped; a key that signs now when none does; a successor
 * when the last period ends within the lead time. Undefined when nothing is due (another
 * instance did it first).
 */
function plan(current: OAuthKeySet | undefined, now: number, schedule: Schedule, fresh: FreshKey): OAuthKeySet | undefined {
  if (!needsChange(current, now, schedule)) return undefined;
  const keys = (current?.keys ?? []).filter((key) => key.retiresAt > now);
  const make = (signsFrom: number): OAuthSigningKey => ({
    kid: fresh.kid,
    alg: "ES256",
    jwk: fresh.jwk,
    createdAt: now,
    signsFrom,
    signsUntil: signsFrom + schedule.rotationMs,
    retiresAt: signsFrom + schedule.rotationMs + schedule.tokenLifetimeMs + 5 * MINUTE,
  });
  if (!signingKeyOf(keys, now)) keys.push(make(now));
  else {
    const last = Math.max(...keys.map((key) => key.signsUntil));
    if (last - now <= leadOf(schedule)) keys.push(make(last));
  }
  return { version: (current?.version ?? 0) + 1, keys };
}

interface FreshKey {
  kid: string;
  jwk: PrivateJwk;
}

async function newKey(): Promise<FreshKey> {
  const { privateKey } = await generateKeyPair("ES256", { extractable: true });
  const jwk = (await exportJWK(privateKey)) as PrivateJwk;
  const { d: _private, ...publicPart } = jwk as JWK;
  return { kid: await calculateJwkThumbprint(publicPart), jwk };
}

/** A key object for jose's verification from a stored key's public half. */
export function verificationKeyObject(key: OAuthSigningKey) {
  return importJWK(publicJwk(key), key.alg);
}
