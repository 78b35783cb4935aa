import { randomInt } from "node:crypto";
import { crc32 } from "node:zlib";
import type { KeyKind } from "../../storage/repos/keys.js";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BODY_LENGTH = 40;
/**
 * The body's first characters are the key's public id (docs/security.md "Keys"): random, not
 * secret, kept in the key's record to recognise it in a listing. The other 32 characters
 * (~190 bits) are the secret, of which nothing is stored but the hash of the whole key.
 */
const PUBLIC_ID_LENGTH = 8;
const CHECK_LENGTH = 6;

export interface KeyPrefixes {
  /** `sk-<service>-` */
  platform: string;
  /** `sk_` */
  gateway: string;
  /** e.g. `acct_` */
  account: string;
}

export function keyPrefixes(platformService: string, accountPrefix: string): KeyPrefixes {
  return { platform: `sk-${platformService}-`, gateway: "sk_", account: accountPrefix };
}

function base62(value: number, width: number): string {
  let out = "";
  for (let i = 0; i < width; i++) {
    out = ALPHABET[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

function checksum(prefix: string, body: string): string {
  return base62(crc32(prefix + body) >>> 0, CHECK_LENGTH);
}

function randomBase62(length: number): string {
  let out = "";
  for (let i = 0; i < length; i++) out += ALPHABET[randomInt(62)];
  return out;
}

/**
 * A new key: prefix, 40 base62 characters (an 8-character public id, then 32 random secret
 * ones), and a 6-character CRC32 checksum. The same format as before the public id, so keys
 * made earlier parse the same way. `publicId` is what a record may keep; `secret` is shown once.
 */
export function generateKey(prefixes: KeyPrefixes, kind: KeyKind): { secret: string; publicId: string } {
  const prefix = prefixes[kind];
  const publicId = randomBase62(PUBLIC_ID_LENGTH);
  const body = publicId + randomBase62(BODY_LENGTH - PUBLIC_ID_LENGTH);
  return { secret: prefix + body + checksum(prefix, body), publicId };
}

/**
 * The kind of a presented secret, or undefined when it has no known prefix, the wrong
 * length, or a checksum that does not match (a typo is refused without a lookup).
 */
export function parseKey(prefixes: KeyPrefixes, secret: string): KeyKind | undefined {
  // Longest prefix first: `sk-gateway-` and `sk_` must not shadow each other.
  const kinds = (Object.keys(prefixes) as KeyKind[]).sort((a, b) => prefixes[b].length - prefixes[a].length);
  for (const kind of kinds) {
    const prefix = prefixes[kind];
    if (!secret.startsWith(prefix)) continue;
    const rest = secret.slice(prefix.length);
    if (rest.length !== BODY_LENGTH + CHECK_LENGTH || !/^[0-9A-Za-z]+$/.test(rest)) return undefined;
    const body = rest.slice(0, BODY_LENGTH);
    return rest.slice(BODY_LENGTH) === checksum(prefix, body) ? kind : undefined;
  }
  return undefined;
}

/**
 * What a list shows of a key: its kind's prefix and its public id (`sk_AbCd1234…`). A record
 * made before public ids has neither: it shows the `hint` it was stored with, the first four
 * characters of its secret, which stays readable so old keys list as they did.
 */
export function keyLabel(prefixes: KeyPrefixes, record: { kind: KeyKind; publicId?: string; hint?: string }): string {
  if (record.publicId) return `${prefixes[record.kind]}${record.publicId}…`;
  return record.hint ?? `${prefixes[record.kind]}…`;
}
