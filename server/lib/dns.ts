import { Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';

/**
 * TXT lookups for domain verification (docs/sites.md, "Custom domains"): through the system's resolver, or through
 * `DNS_SERVERS` when set. Each lookup has a bound, so a silent server cannot hold a request.
 */

/** One try waits this long for an answer; a lookup makes {@link DNS_TRIES} tries per server. */
export const DNS_TIMEOUT_MS = 2000;
export const DNS_TRIES = 2;

/**
 * `DNS_SERVERS`: `host:port` entries separated by commas, each host an IP address (`[::1]:53` for IPv6; the port
 * defaults to 53). Returns the list in the form node's resolver takes, or why it is not valid.
 */
export function parseDnsServers(text: string): { servers: string[] } | { error: string } {
  const servers: string[] = [];
  for (const raw of text.split(',')) {
    const entry = raw.trim();
    if (!entry) continue;
    const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(entry);
    const v4 = /^([\d.]+)(?::(\d{1,5}))?$/.exec(entry);
    const [host, port] = bracketed
      ? [bracketed[1]!, bracketed[2]]
      : v4
        ? [v4[1]!, v4[2]]
        : [entry, undefined];
    const family = isIP(host);
    const portNumber = port === undefined ? 53 : Number(port);
    if (family === 0 || portNumber < 1 || portNumber > 65535) {
      return {
        error: `DNS_SERVERS must be IP addresses with an optional port, such as 10.0.0.2:53,[2001:db8::53]:53 (got ${entry})`,
      };
    }
    servers.push(family === 6 ? `[${host}]:${portNumber}` : `${host}:${portNumber}`);
  }
  if (servers.length === 0) return { error: 'DNS_SERVERS must name at least one server' };
  return { servers };
}

export type TxtLookup =
  | { ok: true; values: string[] }
  /** `missing`: the name has no TXT record (NXDOMAIN or no data); `failed`: no usable answer came. */
  | { ok: false; reason: 'missing' | 'failed'; message: string };

/** The resolver domain checks use (`servers` undefined: the system's). */
export interface TxtResolver {
  txt(name: string): Promise<TxtLookup>;
}

export function createTxtResolver(servers: readonly string[] | undefined): TxtResolver {
  return {
    async txt(name: string): Promise<TxtLookup> {
      const resolver = new Resolver({ timeout: DNS_TIMEOUT_MS, tries: DNS_TRIES });
      if (servers?.length) resolver.setServers([...servers]);
      try {
        // A record split into several strings is one value (RFC 7208 §3.3).
        const records = await resolver.resolveTxt(name);
        return { ok: true, values: records.map((chunks) => chunks.join('')) };
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOTFOUND' || code === 'ENODATA') {
          return { ok: false, reason: 'missing', message: `no TXT record at ${name}` };
        }
        return {
          ok: false,
          reason: 'failed',
          message:
            code === 'ETIMEOUT' || code === 'ECONNREFUSED'
              ? `the DNS servers did not answer for ${name}`
              : `the lookup of ${name} failed (${code ?? 'unknown error'})`,
        };
      } finally {
        resolver.cancel();
      }
    },
  };
}
