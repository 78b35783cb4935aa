import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { generateKey, keyPrefixes, parseKey } from "../../../rpc/credentials/api-keys.js";

const prefixes = keyPrefixes("gateway", "acct_");
const KINDS = ["gateway", "platform", "account"] as const;

describe("key format", () => {
  it("parses every generated key back to its kind", () => {
    fc.assert(
      fc.property(fc.constantFrom(...KINDS), (kind) => {
        expect(parseKey(prefixes, generateKey(prefixes, kind).secret)).toBe(kind);
      }),
    );
  });

  it("refuses any single-character change of a key without a lookup", () => {
    const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    fc.assert(
      fc.property(fc.constantFrom(...KINDS), fc.nat(), fc.nat(60), (kind, position, shift) => {
        const key = generateKey(prefixes, kind).secret;
        const start = prefixes[kind].length;
        const index = start + (position % (key.length - start));
        const replaced = ALPHABET[(ALPHABET.indexOf(key[index]!) + 1 + shift) % 62]!;
        const typo = key.slice(0, index) + replaced + key.slice(index + 1);
        expect(parseKey(prefixes, typo)).toBeUndefined();
      }),
      { numRuns: 500 },
    );
  });

  it("opens the body with the public id, and no two keys share their secret part", () => {
    const seen = new Set<string>();
    for (const kind of KINDS) {
      for (let i = 0; i < 50; i++) {
        const { secret, publicId } = generateKey(prefixes, kind);
        expect(publicId).toMatch(/^[0-9A-Za-z]{8}$/);
        expect(secret.startsWith(prefixes[kind] + publicId)).toBe(true);
        const rest = secret.slice(prefixes[kind].length + publicId.length, -6);
        expect(rest).toMatch(/^[0-9A-Za-z]{32}$/);
        expect(seen.has(rest)).toBe(false);
        seen.add(rest);
      }
    }
  });

  it("refuses foreign prefixes and wrong lengths", () => {
    const key = generateKey(prefixes, "gateway").secret;
    expect(parseKey(prefixes, key.slice(0, -1))).toBeUndefined();
    expect(parseKey(prefixes, `${key}a`)).toBeUndefined();
    expect(parseKey(prefixes, `pk_${key.slice(3)}`)).toBeUndefined();
    expect(parseKey(prefixes, `sk-other-${key.slice(3)}`)).toBeUndefined();
  });
});
