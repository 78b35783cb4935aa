import { randomInt } from "node:crypto";
import { crc32 } from "node:zlib";
import type { KeyKind } from "../../storage/repos/keys.js";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BODY_LENGTH = 40; // ~238 bits
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

/** A new secret: prefix, 40 random base62 characters, and a 6-character CRC32 checksum. */
export function generateKey(prefixes: KeyPrefixes, kind: KeyKind): string {
  const prefix = prefixes[kind];
  let body = "";
  for (let i = 0; i < BODY_LENGTH; i++) body += ALPHABET[randomInt(62)];
  return prefix + body + checksum(prefix, body);
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

/** What a list shows of a key: its prefix and the first four characters of the body. */
export function keyHint(prefixes: KeyPrefixes, kind: KeyKind, secret: string): string {
  return `${secret.slice(0, prefixes[kind].length + 4)}…`;
}
