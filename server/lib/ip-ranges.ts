import ipaddr from 'ipaddr.js';

/**
 * Address ranges in CIDR notation, IPv4 and IPv6 (docs/organization.md, "Security policies"): checked and written in
 * one canonical form, and matched against a client address. An IPv4-mapped IPv6 address (`::ffff:203.0.113.5`, what
 * a dual-stack socket reports for an IPv4 client) is the IPv4 address it maps, as client and as range.
 */

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** One range: its canonical text and what matching needs. */
export interface IpRange {
  /** `203.0.113.0/24`, `2001:db8::/32`: the network address (host bits cleared) and the prefix length. */
  readonly text: string;
  readonly address: Address;
  readonly prefix: number;
}

/** Why a text is not a range (the 400's message). */
export const IP_RANGE_FORMAT =
  'Not an IPv4 or IPv6 range in CIDR notation (such as 203.0.113.0/24 or 2001:db8::/32; a single address is /32 or /128)';

/**
 * IPv6 text (no zone, no brackets) parsed, or null. Through the WHATWG URL parser first: ipaddr.js reads the
 * deprecated IPv4-compatible `::a.b.c.d` as if it were the mapped `::ffff:a.b.c.d`.
 */
function parseIPv6(text: string): ipaddr.IPv6 | null {
  if (!text.includes(':') || text.includes('%') || text.includes('[') || !ipaddr.IPv6.isValid(text))
    return null;
  try {
    return ipaddr.IPv6.parse(new URL(`http://[${text}]/`).hostname.slice(1, -1));
  } catch {
    return null;
  }
}

/** An address as written: dotted-quad IPv4 or IPv6 text; an IPv4-mapped IPv6 address is its IPv4 address. */
function parseAddress(text: string): Address | null {
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return ipaddr.IPv4.parse(text);
  const v6 = parseIPv6(text);
  if (!v6) return null;
  return v6.isIPv4MappedAddress() ? v6.toIPv4Address() : v6;
}

/**
 * Parses `address/prefix` (or a single address, taken as /32 or /128) into its canonical range; null when it is not
 * one. The host bits are cleared (`10.1.2.3/8` → `10.0.0.0/8`); an IPv4-mapped IPv6 range of a prefix of 96 or more is
 * the IPv4 range it maps (`::ffff:10.0.0.0/104` → `10.0.0.0/8`).
 */
export function parseIpRange(input: string): IpRange | null {
  const text = input.trim();
  if (text.length === 0 || text.length > 64) return null;
  const slash = text.indexOf('/');
  const addressText = slash < 0 ? text : text.slice(0, slash);
  const prefixText = slash < 0 ? null : text.slice(slash + 1);
  if (prefixText !== null && !/^\d{1,3}$/.test(prefixText)) return null;
  let address: Address;
  let prefix: number;
  if (ipaddr.IPv4.isValidFourPartDecimal(addressText)) {
    address = ipaddr.IPv4.parse(addressText);
    prefix = prefixText === null ? 32 : Number(prefixText);
    if (prefix > 32) return null;
  } else {
    const v6 = parseIPv6(addressText);
    if (!v6) return null;
    prefix = prefixText === null ? 128 : Number(prefixText);
    if (prefix > 128) return null;
    if (v6.isIPv4MappedAddress() && prefix >= 96) {
      address = v6.toIPv4Address();
      prefix -= 96;
    } else {
      address = v6;
    }
  }
  const network =
    address.kind() === 'ipv4'
      ? ipaddr.IPv4.networkAddressFromCIDR(`${address.toString()}/${prefix}`)
      : ipaddr.IPv6.networkAddressFromCIDR(`${address.toString()}/${prefix}`);
  return { text: `${network.toString()}/${prefix}`, address: network, prefix };
}

/** Whether `text` is a range {@link parseIpRange} accepts. */
export const isIpRange = (text: string): boolean => parseIpRange(text) !== null;

/**
 * The canonical form of a list of ranges (each through {@link parseIpRange}, duplicates dropped, first occurrence
 * kept); throws on an entry that is not a range (check with {@link isIpRange} first).
 */
export function normalizeIpRanges(list: readonly string[]): string[] {
  const out: string[] = [];
  for (const entry of list) {
    const range = parseIpRange(entry);
    if (!range) throw new Error(`not an IP range: ${entry}`);
    if (!out.includes(range.text)) out.push(range.text);
  }
  return out;
}

/** A set of ranges to match client addresses against. */
export class IpRangeSet {
  readonly ranges: readonly IpRange[];
  constructor(list: readonly string[]) {
    this.ranges = list.flatMap((t) => parseIpRange(t) ?? []);
  }

  /** Whether the client address `ip` is in one of the ranges; an address that does not parse is in none. */
  contains(ip: string | undefined): boolean {
    const address = ip === undefined ? null : parseAddress(ip);
    if (!address) return false;
    const kind = address.kind();
    for (const r of this.ranges) {
      if (r.address.kind() !== kind) continue;
      if (
        kind === 'ipv4'
          ? (address as ipaddr.IPv4).match(r.address, r.prefix)
          : (address as ipaddr.IPv6).match(r.address, r.prefix)
      )
        return true;
    }
    return false;
  }
}

/** Compiled sets by their stored list (a handful of distinct lists per process), as the per-request check reads them. */
const compiled = new Map<string, IpRangeSet>();

/** The set of a stored list of ranges, compiled once per distinct list. */
export function ipRangeSetOf(list: readonly string[]): IpRangeSet {
  const key = list.join(',');
  let set = compiled.get(key);
  if (!set) {
    if (compiled.size >= 1000) compiled.clear();
    set = new IpRangeSet(list);
    compiled.set(key, set);
  }
  return set;
}
