import { isIP } from "node:net";
import ipaddr from "ipaddr.js";

/**
 * The address rule for every outbound connection the service makes on a user's behalf
 * (upstream MCP servers, `http_fetch`, webhooks): only public unicast addresses
 * (docs/security.md "Outbound connections"). Classification is ipaddr.js's `range()`, not
 * hand-written prefixes, so loopback, private, link-local (cloud metadata at
 * 169.254.169.254), unique-local, unspecified, multicast, carrier-grade NAT, broadcast and
 * every reserved block are refused in both families.
 *
 * IPv6 forms that carry an IPv4 address are judged by that address or refused outright:
 * - IPv4-mapped `::ffff:a.b.c.d`, SIIT `::ffff:0:a.b.c.d` (RFC 6145) and the well-known NAT64
 *   prefix `64:ff9b::/96` (RFC 6052) reach the embedded IPv4 address: allowed only when it is
 *   public unicast itself;
 * - IPv4-compatible `::a.b.c.d` (deprecated, RFC 4291), local-use NAT64 `64:ff9b:1::/48`
 *   (RFC 8215), 6to4 `2002::/16` (deprecated, RFC 7526) and Teredo `2001::/32` are refused
 *   whatever they embed: no public server needs them, and each is a way around the IPv4 rule.
 */

/** Why `address` may not be connected to, or undefined when it is public unicast. */
export function addressRefusal(address: string): string | undefined {
  const bare = address.replace(/^\[|\]$/g, "");
  // A zone (`fe80::1%eth0`) only exists on link-local and site-scoped addresses.
  if (bare.includes("%")) return "a scoped (zone) address";
  const family = isIP(bare);
  if (family === 4) return ipv4Refusal(ipaddr.IPv4.parse(bare));
  if (family === 6) return ipv6Refusal(canonicalIpv6(bare));
  // Not an address at all: refuse rather than guess.
  return "not an IP address";
}

/** True for an address a connection on a user's behalf must refuse. */
export function isPrivateAddress(address: string): boolean {
  return addressRefusal(address) !== undefined;
}

function ipv4Refusal(address: ipaddr.IPv4): string | undefined {
  const range = address.range();
  return range === "unicast" ? undefined : `${range} address`;
}

/**
 * Parses through the WHATWG URL parser first: ipaddr.js reads `::127.0.0.1` as IPv4-mapped
 * (`::ffff:127.0.0.1`) while the socket layer connects to IPv4-compatible `::7f00:1`; the URL
 * parser gives the form the connection will use.
 */
function canonicalIpv6(address: string): ipaddr.IPv6 {
  const hostname = new URL(`http://[${address}]/`).hostname.replace(/^\[|\]$/g, "");
  return ipaddr.IPv6.parse(hostname);
}

const NAT64_LOCAL = ipaddr.IPv6.parse("64:ff9b:1::");

function ipv6Refusal(address: ipaddr.IPv6): string | undefined {
  const range = address.range();
  const parts = address.parts;
  const embeddedV4 = () => ipaddr.IPv4.parse(`${parts[6]! >> 8}.${parts[6]! & 255}.${parts[7]! >> 8}.${parts[7]! & 255}`);
  switch (range) {
    case "unicast":
      // ::/96 other than :: and ::1 (both classified above) is IPv4-compatible.
      if (parts.slice(0, 6).every((part) => part === 0)) return "IPv4-compatible IPv6 address";
      return undefined;
    case "ipv4Mapped":
    case "rfc6145": {
      const refusal = ipv4Refusal(embeddedV4());
      return refusal ? `IPv6 address embedding a ${refusal}` : undefined;
    }
    case "rfc6052": {
      if (address.match(NAT64_LOCAL, 48)) return "local-use NAT64 address";
      const refusal = ipv4Refusal(embeddedV4());
      return refusal ? `NAT64 address embedding a ${refusal}` : undefined;
    }
    case "6to4":
      return "6to4 address";
    case "teredo":
      return "Teredo address";
    default:
      return `${range} address`;
  }
}
