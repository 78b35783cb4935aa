import { describe, expect, it } from "vitest";
import fc from "fast-check";
import ipaddr from "ipaddr.js";
import { addressRefusal, isPrivateAddress } from "../../../rpc/outbound/private-address.js";

/** The address rule (docs/security.md "Outbound connections"): only public unicast. */

const hex = (n: number) => n.toString(16);
const v4Parts = (a: string) => a.split(".").map(Number) as [number, number, number, number];
const hi = (a: string) => hex((v4Parts(a)[0] << 8) | v4Parts(a)[1]);
const lo = (a: string) => hex((v4Parts(a)[2] << 8) | v4Parts(a)[3]);

/** Every IPv6 form that carries an IPv4 address, written the ways a URL or a resolver could. */
const EMBEDDINGS: Record<string, (v4: string) => string> = {
  "IPv4-mapped dotted": (a) => `::ffff:${a}`,
  "IPv4-mapped hex": (a) => `::ffff:${hi(a)}:${lo(a)}`,
  "IPv4-mapped long form": (a) => `0:0:0:0:0:ffff:${hi(a)}:${lo(a)}`,
  "IPv4-compatible dotted": (a) => `::${a}`,
  "IPv4-compatible hex": (a) => `::${hi(a)}:${lo(a)}`,
  "SIIT dotted": (a) => `::ffff:0:${a}`,
  "SIIT hex": (a) => `::ffff:0:${hi(a)}:${lo(a)}`,
  "NAT64 well-known dotted": (a) => `64:ff9b::${a}`,
  "NAT64 well-known hex": (a) => `64:ff9b::${hi(a)}:${lo(a)}`,
  "NAT64 local-use": (a) => `64:ff9b:1::${hi(a)}:${lo(a)}`,
  "6to4": (a) => `2002:${hi(a)}:${lo(a)}::1`,
  // Teredo: server IPv4 in bits 32-63, the client's IPv4 inverted in the last 32 bits.
  "Teredo client": (a) =>
    `2001:0:4136:e378:8000:63bf:${hex(~((v4Parts(a)[0] << 8) | v4Parts(a)[1]) & 0xffff)}:${hex(~((v4Parts(a)[2] << 8) | v4Parts(a)[3]) & 0xffff)}`,
  "Teredo server": (a) => `2001:0:${hi(a)}:${lo(a)}::1`,
};

const ipv4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((parts) => parts.join("."));
const nonPublicIpv4 = ipv4.filter((a) => ipaddr.IPv4.parse(a).range() !== "unicast");
/** Biased towards the blocks that matter most. */
const notablePrivate = fc.oneof(
  nonPublicIpv4,
  fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255)).map(([b, c, d]) => `127.${b}.${c}.${d}`),
  fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255)).map(([b, c, d]) => `10.${b}.${c}.${d}`),
  fc.tuple(fc.nat(255), fc.nat(255)).map(([c, d]) => `169.254.${c}.${d}`),
  fc.tuple(fc.nat(255), fc.nat(255)).map(([c, d]) => `192.168.${c}.${d}`),
  fc.tuple(fc.integer({ min: 64, max: 127 }), fc.nat(255), fc.nat(255)).map(([b, c, d]) => `100.${b}.${c}.${d}`),
);

describe("private-address rule", () => {
  it("refuses the forms that slipped through hand parsing", () => {
    for (const address of [
      "[::127.0.0.1]",
      "::127.0.0.1",
      "::ffff:0:7f00:1",
      "2002:7f00:1::1",
      "::7f00:1",
      "64:ff9b::7f00:1",
      "64:ff9b:1::a00:1",
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
    ]) {
      expect(isPrivateAddress(address), address).toBe(true);
    }
  });

  it.each([
    ["127.0.0.1", "loopback"],
    ["::1", "loopback"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["192.168.1.1", "private"],
    ["169.254.169.254", "linkLocal"],
    ["fe80::1", "linkLocal"],
    ["fe80::1%eth0", "scoped"],
    ["fc00::1", "uniqueLocal"],
    ["fd12:3456::1", "uniqueLocal"],
    ["0.0.0.0", "unspecified"],
    ["::", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["ff02::1", "multicast"],
    ["100.64.0.1", "carrierGradeNat"],
    ["255.255.255.255", "broadcast"],
    ["192.0.2.10", "reserved"],
    ["198.18.0.1", "reserved"],
    ["240.0.0.1", "reserved"],
    ["2001:db8::1", "reserved"],
    ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"],
    ["not-an-address", "not an IP"],
  ])("refuses %s (%s)", (address, reason) => {
    expect(addressRefusal(address)).toContain(reason);
  });

  it("allows public unicast, and IPv4 reached through mapped or well-known NAT64 forms when that IPv4 is public", () => {
    for (const address of ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "[2a00:1450:4001::200e]", "::ffff:8.8.8.8", "64:ff9b::808:808"]) {
      expect(addressRefusal(address), address).toBeUndefined();
    }
  });

  it.each(Object.entries(EMBEDDINGS))("property: any non-public IPv4 embedded as %s is refused", (_form, embed) => {
    fc.assert(
      fc.property(notablePrivate, (v4) => {
        expect(isPrivateAddress(v4)).toBe(true);
        expect(isPrivateAddress(embed(v4)), embed(v4)).toBe(true);
        expect(isPrivateAddress(`[${embed(v4)}]`)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("property: a bracketed, upper-cased or fully expanded spelling never changes the verdict", () => {
    fc.assert(
      fc.property(fc.ipV6(), (address) => {
        const expanded = ipaddr.IPv6.parse(new URL(`http://[${address}]/`).hostname.slice(1, -1)).toNormalizedString();
        const verdict = isPrivateAddress(address);
        expect(isPrivateAddress(`[${address.toUpperCase()}]`)).toBe(verdict);
        expect(isPrivateAddress(expanded)).toBe(verdict);
      }),
      { numRuns: 1000 },
    );
  });
});
