import { randomBytes } from "node:crypto";
import type { Atomic } from "../atomic.js";
import type { SecretBox } from "../secret-box.js";
import { JsonCells } from "./oauth-cells.js";

/** A private JSON Web Key (RFC 7517) as jose exports it. */
export type PrivateJwk = Record<string, unknown> & { kty: string; kid?: string };

/** One signing key of the authorization server and its schedule (times in ms since the epoch). */
export interface OAuthSigningKey {
  kid: string;
  alg: "ES256";
  /** The private key; sealed at rest. */
  jwk: PrivateJwk;
  createdAt: number;
  /** From when access tokens are signed with it (published in the JWKS before that). */
  signsFrom: number;
  signsUntil: number;
  /** When it leaves the JWKS: after the last token it signed expired. */
  retiresAt: number;
}

export interface OAuthKeySet {
  /** Grows with every change, so an instance knows when to load the keys again. */
  version: number;
  keys: OAuthSigningKey[];
}

interface StoredKey extends Omit<OAuthSigningKey, "jwk"> {
  jwk: string;
}

interface StoredKeySet {
  version: number;
  keys: StoredKey[];
}

const KEY = "oauth:signing-keys";
const COOKIE_SECRET = "oauth:cookie-secret";

/**
 * The authorization server's signing keys, one record shared by every instance, private keys
 * sealed with DATA_ENCRYPTION_SECRET. Changed by compare-and-set only (rpc/credentials/oauth-keys.ts
 * plans the rotation), so two instances rotating at once agree on one key set.
 */
export class OAuthKeysRepo {
  readonly #cells: JsonCells;
  readonly #box: SecretBox;

  constructor(atomic: Atomic, box: SecretBox) {
    this.#cells = new JsonCells(atomic);
    this.#box = box;
  }

  async get(): Promise<OAuthKeySet | undefined> {
    const stored = await this.#cells.get<StoredKeySet>(KEY);
    return stored && this.#open(stored);
  }

  /**
   * Replaces the key set by `plan(current)`, retried while another instance changes it in
   * between; `plan` returns undefined when the current set needs no change.
   */
  async change(plan: (current: OAuthKeySet | undefined) => OAuthKeySet | undefined): Promise<OAuthKeySet | undefined> {
    const written = await this.#cells.update<StoredKeySet>(KEY, (stored) => {
      const next = plan(stored && this.#open(stored));
      return next === undefined ? undefined : { value: this.#seal(next) };
    });
    return written && this.#open(written);
  }

  /**
   * The secret the authorization server's cookies are signed with: made by the first instance
   * that needs it, then read by all (sealed at rest).
   */
  async cookieSecret(): Promise<string> {
    const fresh = this.#box.seal(randomBytes(32).toString("base64url"));
    await this.#cells.create(COOKIE_SECRET, fresh);
    const stored = await this.#cells.get<string>(COOKIE_SECRET);
    if (stored === undefined) throw new Error("The authorization server's cookie secret could not be stored");
    return this.#box.open(stored);
  }

  #seal(set: OAuthKeySet): StoredKeySet {
    return { version: set.version, keys: set.keys.map((key) => ({ ...key, jwk: this.#box.sealJson(key.jwk) })) };
  }

  #open(set: StoredKeySet): OAuthKeySet {
    return { version: set.version, keys: set.keys.map((key) => ({ ...key, jwk: this.#box.openJson(key.jwk) as PrivateJwk })) };
  }
}
