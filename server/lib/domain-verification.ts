import { randomBytes } from 'node:crypto';
import { createTxtResolver } from './dns.js';
import { domainNotVerified, type AppError } from './errors.js';

/**
 * Domain verification by a TXT record (docs/sites.md, "Custom domains"): whoever claims a domain
 * publishes a random value at `_cloud-platform.<domain>`, and the claim holds once a lookup finds it there. Sites'
 * custom domains and the domains of an SSO connection are verified alike.
 */

/** The label the TXT record is published under, before the domain. */
export const DOMAIN_VERIFICATION_PREFIX = '_cloud-platform';

/** The longest domain accepted (a DNS name's limit). */
export const DOMAIN_MAX_LENGTH = 253;

const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const HOSTNAME = new RegExp(`^${LABEL}(?:\\.${LABEL})+$`);

/** Why `domain` is not an acceptable domain to claim (a lower-case host name of two labels or more), or undefined. */
export function domainProblem(domain: string): string | undefined {
  if (domain.length > DOMAIN_MAX_LENGTH) return `must be at most ${DOMAIN_MAX_LENGTH} characters`;
  if (domain !== domain.toLowerCase()) return 'must be lower case';
  if (!HOSTNAME.test(domain)) {
    return 'must be a host name of at least two labels (letters, digits and hyphens), such as www.example.com';
  }
  if (/^\d+$/.test(domain.slice(domain.lastIndexOf('.') + 1)))
    return 'must be a host name, not an IP address';
  return undefined;
}

/** The DNS record that proves a domain is the claimant's. */
export interface VerificationRecord {
  type: 'TXT';
  /** `_cloud-platform.<domain>` */
  name: string;
  /** The claim's token. */
  value: string;
}

/** The record to publish for `domain` and the claim's `token`. */
export function verificationRecord(domain: string, token: string): VerificationRecord {
  return { type: 'TXT', name: `${DOMAIN_VERIFICATION_PREFIX}.${domain}`, value: token };
}

/** A claim's token: 128 random bits in hex, one per claim of a domain. */
export function newVerificationToken(): string {
  return randomBytes(16).toString('hex');
}

/** What a lookup of a claim's record found. */
export type DomainCheck =
  | { ok: true; record: VerificationRecord }
  | {
      ok: false;
      record: VerificationRecord;
      /** Why not, in words: no record, no usable answer, or records without the token. */
      reason: string;
      /** The values found at the record's name (none when the lookup failed). */
      found: string[];
    };

/**
 * Looks up the TXT record of `domain` (resolver: `dnsServers`, `DNS_SERVERS`, or the system's when undefined) and
 * answers whether one of its values is `token`. Bounded in time (server/lib/dns.ts); never throws.
 */
export async function checkDomainRecord(
  dnsServers: readonly string[] | undefined,
  domain: string,
  token: string,
): Promise<DomainCheck> {
  const record = verificationRecord(domain, token);
  const lookup = await createTxtResolver(dnsServers).txt(record.name);
  if (lookup.ok && lookup.values.includes(token)) return { ok: true, record };
  return {
    ok: false,
    record,
    reason: lookup.ok ? `the TXT records at ${record.name} do not hold the expected value` : lookup.message,
    found: lookup.ok ? lookup.values : [],
  };
}

/**
 * 409 `DOMAIN_NOT_VERIFIED` for a check that failed: the message says what to publish; `details[0]` is `{record,
 * found}` (the record expected, and at most 10 of the values seen, each cut to 255 characters).
 */
export function domainNotVerifiedError(domain: string, check: Extract<DomainCheck, { ok: false }>): AppError {
  const { record } = check;
  return domainNotVerified(
    `The domain ${domain} is not verified: ${check.reason}. Publish a TXT record ${record.name} with the value ` +
      `${record.value}, then verify again (DNS changes can take a while to be seen)`,
    [{ record, found: check.found.slice(0, 10).map((v) => v.slice(0, 255)) }],
  );
}

/** Checks the record of `domain` and throws {@link domainNotVerifiedError} unless it holds `token`. */
export async function assertDomainRecord(
  dnsServers: readonly string[] | undefined,
  domain: string,
  token: string,
): Promise<void> {
  const check = await checkDomainRecord(dnsServers, domain, token);
  if (!check.ok) throw domainNotVerifiedError(domain, check);
}
