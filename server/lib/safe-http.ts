import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Outbound HTTP to addresses chosen by customers (webhook endpoints), safe against server-side request forgery.
 *
 * - Addresses are classified with ipaddr.js: only global unicast is allowed (IPv6: `2000::/3` outside every special
 *   range). Loopback, RFC 1918 private, link-local, CGNAT, multicast, broadcast, unspecified, reserved and
 *   documentation ranges, IPv6 site-local and unique-local, IPv4-compatible (`::/96`), 6to4, Teredo and known cloud
 *   metadata addresses are refused. IPv4-mapped IPv6 and the NAT64 prefix `64:ff9b::/96` are judged as the IPv4
 *   address they carry.
 * - Decimal, hex and octal IPv4 forms (`2130706433`, `0x7f.1`, `0177.0.0.1`) are normalised by the WHATWG URL
 *   parser before any check, so they are judged as the dotted address they mean.
 * - The check runs again when connecting: the socket's `lookup` resolves the name, refuses the connection if any
 *   resolved address is not allowed, and connects to the address it checked (no second resolution, so no DNS
 *   rebinding window). Redirects are never followed (node:http does not follow them; a 3xx is just a status).
 */

/** Cloud metadata endpoints, refused even when private targets are allowed for local testing. */
const METADATA_ADDRESSES = new Set([
  '169.254.169.254', // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
  '169.254.170.2', // AWS ECS task metadata
  '169.254.169.123', // AWS time sync
  '168.63.129.16', // Azure wire server
  '100.100.100.200', // Alibaba Cloud
  '192.0.0.192', // Oracle Cloud
  'fd00:ec2::254', // AWS IMDS over IPv6
]);

const METADATA_HOSTNAMES = new Set([
  'metadata.google.internal',
  'metadata.goog',
  'metadata',
  'instance-data',
]);

/** Ranges allowed only with `allowPrivate` (local testing). Everything else but `unicast` is always refused. */
const PRIVATE_RANGES = new Set(['loopback', 'private', 'uniqueLocal', 'carrierGradeNat']);

export interface AddressPolicy {
  /** Allow loopback and private targets, and `http://` (never in production; see config.ts). */
  allowPrivate: boolean;
}

/** Global unicast IPv6 (RFC 4291 §2.4): everything outside it is refused, whatever ipaddr.js names it. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');
/**
 * The well-known NAT64 prefix (RFC 6052): a DNS64 resolver on an IPv6-only network answers it for IPv4-only names,
 * so it is judged as the IPv4 address in its last 32 bits. The local-use prefix `64:ff9b:1::/48` is refused.
 */
const NAT64_V6 = ipaddr.parseCIDR('64:ff9b::/96');

/**
 * Parses an address as written anywhere (a URL's host, a resolver's answer). IPv6 text goes through the WHATWG URL
 * parser first: ipaddr.js reads `::a.b.c.d` (IPv4-compatible, `::/96`) as if it were `::ffff:a.b.c.d`.
 */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  let text = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (text.includes(':')) {
    try {
      text = new URL(`http://[${text}]/`).hostname.replace(/^\[|\]$/g, '');
    } catch {
      return undefined;
    }
  }
  try {
    return ipaddr.parse(text);
  } catch {
    return undefined;
  }
}

/** IPv4 of the last 32 bits of an IPv6 address. */
function embeddedIPv4(v6: ipaddr.IPv6): ipaddr.IPv4 {
  const [hi, lo] = [v6.parts[6]!, v6.parts[7]!];
  return new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
}

function reasonOfIPv4(v4: ipaddr.IPv4, policy: AddressPolicy): string | undefined {
  if (METADATA_ADDRESSES.has(v4.toString())) return 'cloud metadata address';
  const range = v4.range();
  if (range === 'unicast') return undefined;
  if (policy.allowPrivate && PRIVATE_RANGES.has(range)) return undefined;
  return `${range} address`;
}

/**
 * Why an address is refused, or undefined when it may be used: only global unicast is allowed (IPv4 `unicast`;
 * IPv6 in `2000::/3` that ipaddr.js names `unicast`), plus loopback and private ranges with `allowPrivate`.
 * IPv4-mapped addresses and the NAT64 prefix are judged as the IPv4 address they carry; IPv4-compatible (`::/96`),
 * 6to4, Teredo, site-local, unique-local, documentation and every other special range are refused.
 */
export function blockedAddressReason(address: string, policy: AddressPolicy): string | undefined {
  const parsed = parseAddress(address);
  if (!parsed) return 'not an IP address';
  if (parsed.kind() === 'ipv4') return reasonOfIPv4(parsed as ipaddr.IPv4, policy);
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return reasonOfIPv4(v6.toIPv4Address(), policy);
  if (v6.match(NAT64_V6)) {
    const reason = reasonOfIPv4(embeddedIPv4(v6), policy);
    return reason && `NAT64 ${reason}`;
  }
  if (METADATA_ADDRESSES.has(v6.toString())) return 'cloud metadata address';
  const range = v6.range();
  if (range === 'unicast' && v6.match(GLOBAL_UNICAST_V6)) return undefined;
  if (policy.allowPrivate && PRIVATE_RANGES.has(range)) return undefined;
  if (range !== 'unicast') return `${range} address`;
  return v6.match(ipaddr.parseCIDR('::/96')) ? 'IPv4-compatible address' : 'non-global address';
}

export class BlockedAddressError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BlockedAddressError';
  }
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

/**
 * Static checks of a target URL: scheme, credentials, literal addresses and well-known internal names.
 * Does not resolve DNS (see `checkTargetUrl`).
 */
export function checkUrlSyntax(raw: string, policy: AddressPolicy): UrlCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'must be an absolute URL' };
  }
  if (url.protocol !== 'https:' && !(policy.allowPrivate && url.protocol === 'http:')) {
    return { ok: false, reason: 'must use https://' };
  }
  if (url.username || url.password) return { ok: false, reason: 'must not contain credentials' };
  const host = hostOf(url);
  if (!host) return { ok: false, reason: 'must have a host' };
  if (ipaddr.isValid(host)) {
    const reason = blockedAddressReason(host, policy);
    return reason ? { ok: false, reason: `points to a ${reason}` } : { ok: true, url };
  }
  if (METADATA_HOSTNAMES.has(host)) return { ok: false, reason: 'points to a cloud metadata service' };
  if (!policy.allowPrivate && (host === 'localhost' || host.endsWith('.localhost'))) {
    return { ok: false, reason: 'points to a loopback address' };
  }
  return { ok: true, url };
}

/** The URL's host without IPv6 brackets or a trailing dot, lower case. */
function hostOf(url: URL): string {
  return url.hostname
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
    .toLowerCase();
}

export type Resolver = (hostname: string) => Promise<string[]>;

/** All addresses of a name, as the system resolver (and /etc/hosts) gives them. */
export const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) => {
    dns.lookup(hostname, { all: true, order: 'verbatim' }, (err, addresses) => {
      if (err) reject(err);
      else resolve(addresses.map((a) => a.address));
    });
  });

/**
 * Full check for create/update: the static checks, then the name's current addresses. A name that does not
 * resolve right now is accepted (DNS may not be set up yet); delivery checks again on every connection.
 */
export async function checkTargetUrl(
  raw: string,
  policy: AddressPolicy,
  resolver: Resolver = systemResolver,
  timeoutMs = 2000,
): Promise<UrlCheck> {
  const syntax = checkUrlSyntax(raw, policy);
  if (!syntax.ok) return syntax;
  const host = hostOf(syntax.url);
  if (ipaddr.isValid(host)) return syntax;
  let addresses: string[];
  try {
    addresses = await withTimeout(resolver(host), timeoutMs);
  } catch {
    return syntax;
  }
  for (const address of addresses) {
    const reason = blockedAddressReason(address, policy);
    if (reason) return { ok: false, reason: `resolves to a ${reason}` };
  }
  return syntax;
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timeout')), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

export interface SafeHttpOptions extends AddressPolicy {
  /** Whole exchange: connect, send, response headers and (capped) body. */
  timeoutMs: number;
  /** Response bytes read at most; the rest is discarded by closing the connection. */
  maxResponseBytes?: number;
  /** Name resolution (tests replace it to simulate DNS answers). */
  resolver?: Resolver;
  /** Sockets kept open per origin. */
  maxSocketsPerHost?: number;
}

export type SafeHttpResult =
  | { kind: 'response'; status: number; timeMs: number; bodyBytes: number }
  | { kind: 'error'; error: string; blocked: boolean; timeMs: number };

export interface SafeHttpClient {
  post(url: string, body: Buffer, headers: Record<string, string>): Promise<SafeHttpResult>;
  close(): void;
}

/**
 * A socket's `lookup` that resolves through `resolver`, refuses a name any of whose addresses `policy` does not
 * allow, and hands the socket the address it checked (no second resolution between the check and the connect).
 */
export function guardedLookup(resolver: Resolver, policy: AddressPolicy): LookupFunction {
  return (hostname, options, callback) => {
    const host = hostname.replace(/\.$/, '').toLowerCase();
    resolver(host).then(
      (addresses) => {
        if (addresses.length === 0) {
          callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 4);
          return;
        }
        for (const address of addresses) {
          const reason = blockedAddressReason(address, policy);
          if (reason) {
            callback(new BlockedAddressError(`${hostname} resolves to a ${reason}`), '', 4);
            return;
          }
        }
        const family = (a: string) => (ipaddr.IPv6.isValid(a) ? 6 : 4);
        if (options.all) {
          callback(
            null,
            addresses.map((a) => ({ address: a, family: family(a) })),
          );
        } else {
          callback(null, addresses[0]!, family(addresses[0]!));
        }
      },
      (err: unknown) => callback(err as NodeJS.ErrnoException, '', 4),
    );
  };
}

export function createSafeHttpClient(opts: SafeHttpOptions): SafeHttpClient {
  const policy: AddressPolicy = { allowPrivate: opts.allowPrivate };
  const resolver = opts.resolver ?? systemResolver;
  const maxResponseBytes = opts.maxResponseBytes ?? 64 * 1024;

  const lookup = guardedLookup(resolver, policy);

  const agentOptions = {
    keepAlive: true,
    maxSockets: opts.maxSocketsPerHost ?? 64,
    maxFreeSockets: 16,
    timeout: opts.timeoutMs,
    lookup,
  };
  const httpAgent = new http.Agent(agentOptions);
  const httpsAgent = new https.Agent(agentOptions);

  return {
    async post(rawUrl, body, headers) {
      const started = performance.now();
      const elapsed = () => Math.round(performance.now() - started);
      const check = checkUrlSyntax(rawUrl, policy);
      if (!check.ok)
        return { kind: 'error', error: `Refused: URL ${check.reason}`, blocked: true, timeMs: 0 };
      const url = check.url;
      const isHttps = url.protocol === 'https:';
      return new Promise<SafeHttpResult>((resolve) => {
        let settled = false;
        const finish = (r: SafeHttpResult) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(r);
        };
        const req = (isHttps ? https : http).request(
          url,
          {
            method: 'POST',
            agent: isHttps ? httpsAgent : httpAgent,
            lookup,
            headers: { ...headers, 'content-length': String(body.length) },
          },
          (res) => {
            let received = 0;
            res.on('data', (chunk: Buffer) => {
              received += chunk.length;
              if (received > maxResponseBytes) {
                // Enough: the status is what counts. Closing the socket stops the transfer.
                res.destroy();
                finish({
                  kind: 'response',
                  status: res.statusCode ?? 0,
                  timeMs: elapsed(),
                  bodyBytes: received,
                });
              }
            });
            res.on('end', () =>
              finish({
                kind: 'response',
                status: res.statusCode ?? 0,
                timeMs: elapsed(),
                bodyBytes: received,
              }),
            );
            res.on('error', (err) => finish(errorResult(err, elapsed())));
          },
        );
        const timer = setTimeout(() => {
          req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' }));
          finish({
            kind: 'error',
            error: `Timed out after ${opts.timeoutMs} ms`,
            blocked: false,
            timeMs: elapsed(),
          });
        }, opts.timeoutMs);
        req.on('error', (err) => finish(errorResult(err, elapsed())));
        req.end(body);
      });
    },
    close() {
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}

function errorResult(err: Error & { code?: string }, timeMs: number): SafeHttpResult {
  if (err instanceof BlockedAddressError) {
    return { kind: 'error', error: `Refused: ${err.message}`, blocked: true, timeMs };
  }
  // Only a short, driver-free description is kept: it is shown to the customer in delivery history.
  const code = err.code ?? 'EUNKNOWN';
  const known: Record<string, string> = {
    ECONNREFUSED: 'Connection refused',
    ECONNRESET: 'Connection reset',
    ENOTFOUND: 'Host not found',
    EAI_AGAIN: 'Host name resolution failed',
    ETIMEDOUT: 'Timed out',
    EHOSTUNREACH: 'Host unreachable',
    ENETUNREACH: 'Network unreachable',
    EPROTO: 'TLS handshake failed',
    CERT_HAS_EXPIRED: 'TLS certificate has expired',
    DEPTH_ZERO_SELF_SIGNED_CERT: 'TLS certificate is self-signed',
    SELF_SIGNED_CERT_IN_CHAIN: 'TLS certificate is self-signed',
    UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS certificate could not be verified',
    ERR_TLS_CERT_ALTNAME_INVALID: 'TLS certificate does not match the host name',
    HPE_INVALID_CONSTANT: 'Invalid HTTP response',
  };
  return { kind: 'error', error: known[code] ?? `Request failed (${code})`, blocked: false, timeMs };
}
