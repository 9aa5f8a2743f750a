import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import { z } from 'zod';
import { parseDuration, parseDurationList } from './lib/time.js';
import { databaseHostsText, parseDatabaseHosts, type DatabaseHost } from './lib/database-hosts.js';
import { parseDnsServers } from './lib/dns.js';

/**
 * `item` as an origin (scheme, host and port, as browsers send in `Origin`; a trailing `/` is tolerated), or
 * undefined when it is anything more or less than an http(s) origin.
 */
function bareOrigin(item: string): string | undefined {
  try {
    const url = new URL(item);
    const bare = url.pathname === '/' && !url.search && !url.hash && !url.username && !url.password;
    return /^https?:$/.test(url.protocol) && bare && !/^[^/]*\/\/[^/]*\/./.test(item)
      ? url.origin
      : undefined;
  } catch {
    return undefined;
  }
}

const bool = (name: string) =>
  z
    .string()
    .trim()
    .toLowerCase()
    .refine((v) => ['true', 'false', '1', '0', 'yes', 'no'].includes(v), {
      message: `${name} must be true or false`,
    })
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

const int = (name: string, min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, `${name} must be a whole number`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `${name} must be between ${min} and ${max}`);

/** A duration such as `500ms`, `30s`, `24h`, `7d` (a bare number is milliseconds), between `minMs` and `maxMs`. */
const duration = (name: string, minMs: number, maxMs: number) =>
  z
    .string()
    .trim()
    .transform((s, ctx) => {
      const ms = parseDuration(s);
      if (ms === undefined || ms < minMs || ms > maxMs) {
        ctx.addIssue({
          code: 'custom',
          message: `${name} must be a duration such as 30s, 15m, 24h or 7d, from ${minMs} ms to ${maxMs / 86_400_000} days`,
        });
        return z.NEVER;
      }
      return ms;
    });

/** A size such as `512MiB`, `2GiB` or `1.5GB` (a bare number is bytes), between `min` and `max` bytes. */
const size = (name: string, min: number, max: number) =>
  z
    .string()
    .trim()
    .transform((s, ctx) => {
      const bytes = parseSize(s);
      if (bytes === undefined || bytes < min || bytes > max) {
        ctx.addIssue({
          code: 'custom',
          message: `${name} must be a size such as 512MiB or 2GiB, from ${min} to ${max} bytes`,
        });
        return z.NEVER;
      }
      return bytes;
    });

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  k: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gib: 1024 ** 3,
  t: 1024 ** 4,
  tib: 1024 ** 4,
};

/** Bytes of a size such as `512MiB`, `2GiB`, `1.5GB`, `100k` (binary for `K`/`KiB`…, decimal for `KB`…). */
export function parseSize(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  const unit = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) return undefined;
  return Math.floor(Number(m[1]) * unit);
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const NODE_ENVS = ['development', 'production', 'test'] as const;

const ZEnv = z.object({
  NODE_ENV: z
    .enum(NODE_ENVS, { error: `NODE_ENV must be one of ${NODE_ENVS.join(', ')}` })
    .default('development'),
  PORT: int('PORT', 0, 65535).default(3000),
  HOST: z.string().trim().min(1).default('127.0.0.1'),
  DATABASE_URL: z
    .string()
    .trim()
    .regex(/^postgres(ql)?:\/\/.+/, 'DATABASE_URL must be a postgres:// or postgresql:// URL')
    .optional(),
  DATA_DIR: z.string().trim().min(1).default('./data'),
  JWT_SECRET: z
    .string()
    .refine((s) => Buffer.byteLength(s, 'utf8') >= 32, 'JWT_SECRET must be at least 32 bytes')
    .optional(),
  TWO_FACTOR_KEY: z
    .string()
    .refine((s) => Buffer.byteLength(s, 'utf8') >= 32, 'TWO_FACTOR_KEY must be at least 32 bytes')
    .optional(),
  TWO_FACTOR_KEY_PREVIOUS: z
    .string()
    .refine((s) => Buffer.byteLength(s, 'utf8') >= 32, 'TWO_FACTOR_KEY_PREVIOUS must be at least 32 bytes')
    .optional(),
  OWNER_EMAIL: z.email('OWNER_EMAIL must be an email address').optional(),
  OWNER_PASSWORD: z
    .string()
    .refine((s) => {
      const n = Buffer.byteLength(s, 'utf8');
      return n >= 8 && n <= 72;
    }, 'OWNER_PASSWORD must be 8 to 72 bytes')
    .optional(),
  OWNER_NAME: z.string().trim().min(1).max(100).default('Owner'),
  ORGANIZATION_NAME: z.string().trim().min(1).max(100).default('My Organization'),
  SIGNUP_ENABLED: bool('SIGNUP_ENABLED').default(true),
  PUBLIC_BASE_URL: z
    .url({ protocol: /^https?$/, error: 'PUBLIC_BASE_URL must be an absolute http:// or https:// URL' })
    .optional(),
  BCRYPT_COST: int('BCRYPT_COST', 4, 15).default(12),
  TRUST_PROXY: bool('TRUST_PROXY').default(false),
  TLS_CERT_FILE: z.string().trim().min(1).optional(),
  TLS_KEY_FILE: z.string().trim().min(1).optional(),
  PROVISIONING_DELAY_MS: int('PROVISIONING_DELAY_MS', 0, 3_600_000).default(2000),
  VPN_AGENT_OFFLINE_MS: int('VPN_AGENT_OFFLINE_MS', 1000, 3_600_000).default(30_000),
  WEBHOOK_ALLOW_PRIVATE_TARGETS: bool('WEBHOOK_ALLOW_PRIVATE_TARGETS').default(false),
  WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .optional()
    .transform((s, ctx) => {
      if (s === undefined) return undefined;
      const parsed = parseDurationList(s);
      if (!parsed) {
        ctx.addIssue({
          code: 'custom',
          message: 'WEBHOOK_RETRY_SCHEDULE must be comma-separated durations such as 1s,2s,5m',
        });
        return z.NEVER;
      }
      return parsed;
    }),
  WEBHOOK_TIMEOUT_MS: int('WEBHOOK_TIMEOUT_MS', 100, 60_000).default(10_000),
  WEBHOOK_DISABLE_AFTER: duration('WEBHOOK_DISABLE_AFTER', 1000, 365 * 86_400_000).default(5 * 86_400_000),
  RATE_LIMIT_BURST: int('RATE_LIMIT_BURST', 1, 1_000_000).default(100),
  EVENT_STREAM_RECHECK_INTERVAL: duration('EVENT_STREAM_RECHECK_INTERVAL', 50, 3_600_000).default(5_000),
  AUTH_RATE_LIMIT: int('AUTH_RATE_LIMIT', 1, 1_000_000).default(20),
  AUTH_RATE_LIMIT_WINDOW: duration('AUTH_RATE_LIMIT_WINDOW', 1000, 86_400_000).default(60_000),
  REDIS_URL: z
    .string()
    .trim()
    .refine((s) => {
      if (!/^rediss?:\/\//.test(s)) return false;
      try {
        const url = new URL(s);
        return url.hostname !== '' && /^(\/\d{0,5})?$/.test(url.pathname);
      } catch {
        return false;
      }
    }, 'REDIS_URL must be a redis:// or rediss:// URL such as redis://127.0.0.1:6379 or redis://:password@host:6379/0')
    .optional(),
  REDIS_KEY_PREFIX: z
    .string()
    .regex(
      /^[\x21-\x7e]{1,100}$/,
      'REDIS_KEY_PREFIX must be 1 to 100 printable ASCII characters without spaces',
    )
    .default('cloud-platform:'),
  AUDIT_LOG_ENABLED: bool('AUDIT_LOG_ENABLED').default(true),
  MAIL_URL: z
    .string()
    .trim()
    .refine((s) => {
      try {
        const url = new URL(s);
        return (url.protocol === 'smtp:' || url.protocol === 'smtps:') && url.hostname !== '';
      } catch {
        return false;
      }
    }, 'MAIL_URL must be an smtp:// or smtps:// URL such as smtp://user:password@mail.example.com:587')
    .optional(),
  MAIL_FROM: z
    .string()
    .trim()
    .min(3)
    .max(320)
    .refine(
      (s) => /^[^<>@\s]+@[^<>@\s]+$/.test(s) || /^[^<>\r\n]*<[^<>@\s]+@[^<>@\s]+>$/.test(s),
      'MAIL_FROM must be an address such as no-reply@example.com or Example <no-reply@example.com>',
    )
    .optional(),
  PASSWORD_RESET_TTL: duration('PASSWORD_RESET_TTL', 60_000, 86_400_000).default(30 * 60_000),
  SESSION_MAX_AGE: duration('SESSION_MAX_AGE', 3_600_000, 365 * 86_400_000).default(90 * 86_400_000),
  SITES_DOMAIN: z
    .string()
    .trim()
    .toLowerCase()
    .regex(
      /^(?=.{1,200}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/,
      'SITES_DOMAIN must be a host name of at least two labels, such as sites.example.com',
    )
    .default('sites.example.com'),
  BUILDER: z
    .enum(['simulated', 'local'], { error: 'BUILDER must be simulated or local' })
    .default('simulated'),
  BUILD_SANDBOX: z.enum(['bwrap', 'none'], { error: 'BUILD_SANDBOX must be bwrap or none' }).default('bwrap'),
  BUILD_TIMEOUT: duration('BUILD_TIMEOUT', 1000, 3_600_000).default(10 * 60_000),
  BUILD_CONCURRENCY: int('BUILD_CONCURRENCY', 1, 64).default(2),
  BUILD_MEMORY_LIMIT: size('BUILD_MEMORY_LIMIT', 64 * 1024 ** 2, 1024 ** 4).default(2 * 1024 ** 3),
  BUILD_DISK_LIMIT: size('BUILD_DISK_LIMIT', 1024 ** 2, 1024 ** 4).default(2 * 1024 ** 3),
  BUILD_CONCURRENCY_PER_ORGANIZATION: int('BUILD_CONCURRENCY_PER_ORGANIZATION', 1, 64).default(1),
  BUILD_LOG_MAX_LINES: int('BUILD_LOG_MAX_LINES', 100, 1_000_000).default(20_000),
  ARTIFACTS_DIR: z.string().trim().min(1).optional(),
  ARTIFACT_MAX_MB: int('ARTIFACT_MAX_MB', 1, 100_000).default(200),
  EDGE_PORT: int('EDGE_PORT', 0, 65535).optional(),
  EDGE_HOST: z.string().trim().min(1).optional(),
  /** Where domain verification looks up TXT records (docs/sites.md, "Custom domains"); unset: the system's resolver. */
  DNS_SERVERS: z
    .string()
    .trim()
    .transform((s, ctx) => {
      const parsed = parseDnsServers(s);
      if ('error' in parsed) {
        ctx.addIssue({ code: 'custom', message: parsed.error });
        return z.NEVER;
      }
      return parsed.servers;
    })
    .optional(),
  BACKUP_INTERVAL: duration('BACKUP_INTERVAL', 100, 366 * 86_400_000).default(24 * 3_600_000),
  DATABASE_DELETION_GRACE: duration('DATABASE_DELETION_GRACE', 0, 90 * 86_400_000).default(24 * 3_600_000),
  /** Real database servers (docs/databases.md, "Databases", Real servers): `<engine>@<region>=<admin URL>`, comma-separated. */
  DATABASE_HOSTS: z.string().trim().optional(),
  DATABASE_HOSTS_FILE: z.string().trim().optional(),
  /** Where backups of real databases are kept; default `DATA_DIR/backups`. */
  BACKUP_DIR: z.string().trim().min(1).optional(),
  /** The wall clock of one run of a database tool (dump, restore); docs/databases.md, "Limits of the tools". */
  DATABASE_TOOL_TIMEOUT: duration('DATABASE_TOOL_TIMEOUT', 1000, 6 * 3_600_000).default(30 * 60_000),
  /** How long a dump waits for a lock held on the tenant's tables before it fails. */
  DATABASE_DUMP_LOCK_TIMEOUT: duration('DATABASE_DUMP_LOCK_TIMEOUT', 100, 3_600_000).default(60_000),
  /**
   * Connections of each real database server kept for the admin and the platform (dumps, restores, the API's
   * pools); the connection limits of the databases placed on a server fit in the rest (docs/databases.md,
   * "Capacity of a server").
   */
  DATABASE_CONNECTION_RESERVE: int('DATABASE_CONNECTION_RESERVE', 0, 100_000).default(10),
  /** Replaces the `max_connections` read from each server (a server behind a connection pooler; tests). */
  DATABASE_SERVER_MAX_CONNECTIONS: int('DATABASE_SERVER_MAX_CONNECTIONS', 1, 10_000_000).optional(),
  BILLING_PERIOD: z
    .string()
    .trim()
    .default('1mo')
    .transform((s, ctx) => {
      const months = /^(\d{1,2})mo$/.exec(s);
      if (months && Number(months[1]) >= 1) return { months: Number(months[1]) };
      const ms = /mo$/.test(s) ? undefined : parseDuration(s);
      if (ms === undefined || ms < 1000 || ms % 1000 !== 0) {
        ctx.addIssue({
          code: 'custom',
          message:
            'BILLING_PERIOD must be a number of months (1mo) or whole seconds of at least 1 s (30s, 1h, 7d)',
        });
        return z.NEVER;
      }
      return { ms };
    }),
  BILLING_RETRY_SCHEDULE: z
    .string()
    .default('1d,3d,5d')
    .transform((s, ctx) => {
      const parsed = parseDurationList(s);
      if (!parsed) {
        ctx.addIssue({
          code: 'custom',
          message: 'BILLING_RETRY_SCHEDULE must be comma-separated durations such as 1d,3d,5d',
        });
        return z.NEVER;
      }
      return parsed;
    }),
  TAX_RATE: z
    .string()
    .trim()
    .default('0')
    .refine(
      (s) => /^\d{1,3}(\.\d{1,3})?$/.test(s) && Number(s) <= 100,
      'TAX_RATE must be a percentage from 0 to 100 with at most three decimals',
    )
    .transform(Number),
  TAX_JURISDICTION: z.string().trim().min(1).max(100).default('US'),
  CORS_ORIGINS: z
    .string()
    .trim()
    .default('*')
    .transform((s, ctx) => {
      if (s === '*') return '*' as const;
      const origins: string[] = [];
      for (const item of s.split(',').map((x) => x.trim())) {
        const origin = bareOrigin(item);
        if (!origin) {
          ctx.addIssue({
            code: 'custom',
            message:
              'CORS_ORIGINS must be * or comma-separated origins such as https://app.example.com,http://localhost:5173',
          });
          return z.NEVER;
        }
        if (!origins.includes(origin)) origins.push(origin);
      }
      return origins;
    }),
  SSO_RETURN_ORIGINS: z
    .string()
    .trim()
    .default('')
    .transform((s, ctx) => {
      const origins: string[] = [];
      for (const item of s
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== '')) {
        const origin = bareOrigin(item);
        if (!origin) {
          ctx.addIssue({
            code: 'custom',
            message: 'SSO_RETURN_ORIGINS must be comma-separated origins such as https://app.example.com',
          });
          return z.NEVER;
        }
        if (!origins.includes(origin)) origins.push(origin);
      }
      return origins;
    }),
  LOG_LEVEL: z
    .enum(LOG_LEVELS, { error: `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}` })
    .default('info'),
});

/** Default retry delays of webhook deliveries (docs/webhooks.md, "Webhooks"), in milliseconds. */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  14 * 3_600_000,
  20 * 3_600_000,
  20 * 3_600_000,
];

export interface Config {
  nodeEnv: 'development' | 'production' | 'test';
  isProduction: boolean;
  port: number;
  host: string;
  databaseUrl: string | undefined;
  dataDir: string;
  /** Explicit secret; when undefined outside production one is generated into DATA_DIR at start. */
  jwtSecret: string | undefined;
  /**
   * Encrypts two-factor secrets at rest. Unset: in production derived from JWT_SECRET, otherwise generated into
   * DATA_DIR at start.
   */
  twoFactorKey: string | undefined;
  /**
   * The at-rest key being rotated out (docs/security.md, "Rotating the at-rest key"): still accepted for decryption;
   * what it encrypted is re-encrypted under the current key at start.
   */
  twoFactorKeyPrevious: string | undefined;
  owner: { email: string; password: string; name: string; organizationName: string } | undefined;
  signupEnabled: boolean;
  publicBaseUrl: string;
  bcryptCost: number;
  trustProxy: boolean;
  /** Certificate and key, read and checked as a pair at start. */
  tls: { certFile: string; keyFile: string; cert: Buffer; key: Buffer } | undefined;
  provisioningDelayMs: number;
  /** A VPN agent server that has not reported for this long goes `offline` (docs/vpn-servers.md). */
  vpnAgentOfflineMs: number;
  webhook: {
    allowPrivateTargets: boolean;
    retryScheduleMs: number[];
    timeoutMs: number;
    /** A webhook whose attempts have all failed for this long is disabled (docs/webhooks.md, "Webhooks"). */
    disableAfterMs: number;
  };
  rateLimitBurst: number;
  /**
   * Requests per window from one client address to one unauthenticated endpoint (login, register, refresh, ...)
   * before 429 RATE_LIMITED (docs/security.md).
   */
  authRateLimit: { points: number; windowSeconds: number };
  /** How often an open event stream checks that its caller may still act (docs/security.md), in milliseconds. */
  eventStreamRecheckMs: number;
  /**
   * Redis shared by every process for the burst limits and the monthly quota counters (docs/deploying.md); undefined:
   * each process keeps its own and no Redis connection is made.
   */
  redis: { url: string; keyPrefix: string } | undefined;
  /** SMTP server and sender of outgoing mail; undefined: the log driver (never in production). */
  mail: { url: string; from: string } | undefined;
  /** How long a password-reset link works (docs/accounts-and-sessions.md, "Accounts and sessions"). */
  passwordResetTtlMs: number;
  /** Absolute lifetime of a login session from its sign-in: refreshing never extends it past this. */
  sessionMaxAgeMs: number;
  /** False only to measure what the audit log costs (the benchmark); every change is audited otherwise. */
  auditLogEnabled: boolean;
  /** Sites are served at `https://<slug>.<sitesDomain>` (docs/sites.md, "Sites and deployments"). */
  sitesDomain: string;
  /** TXT lookups of domain verification (server/lib/dns.ts): `DNS_SERVERS`, or undefined for the system's resolver. */
  dnsServers: string[] | undefined;
  /** Real builds and the edge (docs/hosting.md). */
  hosting: {
    builder: 'simulated' | 'local';
    /** `none` runs builds without a sandbox (refused in production). */
    sandbox: 'bwrap' | 'none';
    buildTimeoutMs: number;
    buildConcurrency: number;
    /** Memory of one build, its processes together (docs/hosting.md, "The sandbox"). */
    buildMemoryLimit: number;
    /** Disk of one build, every file of it (checkout, /tmp) together (docs/hosting.md, "The sandbox"). */
    buildDiskLimit: number;
    /** Builds of one organization at once, all processes together (docs/hosting.md, "Sharing the builders"). */
    buildConcurrencyPerOrganization: number;
    /** Lines a deployment's log keeps (docs/hosting.md, "Build logs"). */
    buildLogMaxLines: number;
    artifactsDir: string;
    artifactMaxBytes: number;
    /** The edge's listen address; undefined: no edge in this process. */
    edge: { port: number; host: string } | undefined;
  };
  /** Managed databases (docs/databases.md, "Databases"): automatic backup interval and deletion grace, in milliseconds. */
  databases: {
    backupIntervalMs: number;
    deletionGraceMs: number;
    /** The real servers; undefined: every engine is simulated. Holds admin URLs: never log it. */
    hosts: DatabaseHost[] | undefined;
    backupDir: string;
    /** Bounds of every tool run: its wall clock and a dump's wait for a lock (docs/databases.md, "Limits of the tools"). */
    tools: { timeoutMs: number; lockWaitMs: number };
    /** What each server gives tenants' databases (docs/databases.md, "Capacity of a server"). */
    capacity: { reserve: number; maxConnections: number | undefined };
  };
  billing: {
    /** One billing period: calendar months from the subscription's anchor, or a fixed length (tests). */
    period: { months: number } | { ms: number };
    /** Delays between charge retries of an unpaid invoice, in milliseconds. */
    retryScheduleMs: number[];
    /** Percent applied to every invoice, and its label. */
    taxRate: number;
    taxJurisdiction: string;
  };
  logLevel: (typeof LOG_LEVELS)[number];
  /**
   * Origins whose pages may call `/v1` and `/trpc` (CORS, docs/api-conventions.md "Browsers (CORS)"): `*` for any, else exact
   * origins (`https://app.example.com`, lowercased as browsers send them).
   */
  corsOrigins: '*' | string[];
  /**
   * Origins besides loopback that a single sign-on may send its code back to (`return_to`, docs/sso.md): exact
   * origins, lowercased.
   */
  ssoReturnOrigins: string[];
}

export class ConfigError extends Error {
  constructor(public readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = z.infer<typeof ZEnv>;

/** Values never repeated in an error message. */
const SECRET_KEYS = new Set([
  'JWT_SECRET',
  'TWO_FACTOR_KEY',
  'TWO_FACTOR_KEY_PREVIOUS',
  'OWNER_PASSWORD',
  'DATABASE_URL',
  'REDIS_URL',
  'MAIL_URL',
  'DATABASE_HOSTS',
]);

/** The servers of DATABASE_HOSTS (or DATABASE_HOSTS_FILE); a problem line, without any URL, when they are wrong. */
function loadDatabaseHosts(
  hosts: string | undefined,
  file: string | undefined,
  problems: string[],
): DatabaseHost[] | undefined {
  const key = hosts ? 'DATABASE_HOSTS' : 'DATABASE_HOSTS_FILE';
  let text: string | undefined;
  try {
    text = databaseHostsText(hosts, file);
  } catch (err) {
    problems.push(
      `DATABASE_HOSTS_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
    return undefined;
  }
  if (text === undefined) return undefined;
  try {
    return parseDatabaseHosts(text);
  } catch (err) {
    problems.push(`${key}: ${(err as Error).message}`);
    return undefined;
  }
}

function problemLine(key: string, message: string, value: string | undefined): string {
  const line = message.startsWith(key) ? message : `${key}: ${message}`;
  if (value === undefined || SECRET_KEYS.has(key)) return line;
  const shown = value.length > 60 ? `${value.slice(0, 60)}…` : value;
  return `${line} (got ${JSON.stringify(shown)})`;
}

/** Reads the TLS pair and checks that it loads; a problem line when it does not. */
function loadTls(certFile: string, keyFile: string, problems: string[]): Config['tls'] {
  let cert: Buffer;
  let key: Buffer;
  try {
    cert = readFileSync(certFile);
  } catch (err) {
    problems.push(
      `TLS_CERT_FILE: cannot read ${certFile} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
    );
    return undefined;
  }
  try {
    key = readFileSync(keyFile);
  } catch (err) {
    problems.push(`TLS_KEY_FILE: cannot read ${keyFile} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    return undefined;
  }
  try {
    createSecureContext({ cert, key });
  } catch {
    problems.push('TLS_CERT_FILE and TLS_KEY_FILE must be a PEM certificate and its matching private key');
    return undefined;
  }
  return { certFile, keyFile, cert, key };
}

/**
 * Parses the environment once. Throws ConfigError listing every problem, one line each: each variable is checked on
 * its own, so one bad value does not hide another.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // An empty variable means "unset", as in most twelve-factor tooling.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const problems: string[] = [];
  const parsed: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(ZEnv.shape)) {
    const result = (schema as z.ZodType).safeParse(cleaned[key]);
    if (result.success) parsed[key] = result.data;
    else
      for (const issue of result.error.issues) problems.push(problemLine(key, issue.message, cleaned[key]));
  }
  const e = parsed as Partial<Env>;
  const isProduction = e.NODE_ENV === 'production';
  if (isProduction && !e.JWT_SECRET && !cleaned.JWT_SECRET)
    problems.push('JWT_SECRET is required when NODE_ENV=production');
  if (isProduction && e.BCRYPT_COST !== undefined && e.BCRYPT_COST < 10)
    problems.push('BCRYPT_COST must be at least 10 when NODE_ENV=production');
  if (isProduction && e.WEBHOOK_ALLOW_PRIVATE_TARGETS)
    problems.push('WEBHOOK_ALLOW_PRIVATE_TARGETS cannot be true when NODE_ENV=production');
  if (isProduction && e.BUILD_SANDBOX === 'none')
    problems.push('BUILD_SANDBOX cannot be none when NODE_ENV=production');
  // The log driver would put every mailed link (invitations, password resets) in the log.
  if (isProduction && !cleaned.MAIL_URL)
    problems.push('MAIL_URL is required when NODE_ENV=production (an smtp:// or smtps:// URL)');
  if (cleaned.MAIL_URL && !cleaned.MAIL_FROM) problems.push('MAIL_FROM is required with MAIL_URL');
  if (cleaned.TWO_FACTOR_KEY_PREVIOUS && cleaned.TWO_FACTOR_KEY_PREVIOUS === cleaned.TWO_FACTOR_KEY)
    problems.push(
      'TWO_FACTOR_KEY_PREVIOUS must differ from TWO_FACTOR_KEY (it is the key being rotated out)',
    );
  if (Boolean(cleaned.OWNER_EMAIL) !== Boolean(cleaned.OWNER_PASSWORD))
    problems.push('OWNER_EMAIL and OWNER_PASSWORD must be set together');
  if (Boolean(cleaned.TLS_CERT_FILE) !== Boolean(cleaned.TLS_KEY_FILE))
    problems.push('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  const tls =
    e.TLS_CERT_FILE && e.TLS_KEY_FILE ? loadTls(e.TLS_CERT_FILE, e.TLS_KEY_FILE, problems) : undefined;
  const databaseHosts = loadDatabaseHosts(e.DATABASE_HOSTS, e.DATABASE_HOSTS_FILE, problems);
  if (problems.length) throw new ConfigError(problems);
  const v = e as Env;

  const displayHost = v.HOST === '0.0.0.0' || v.HOST === '::' ? 'localhost' : v.HOST;
  const scheme = tls ? 'https' : 'http';
  return {
    nodeEnv: v.NODE_ENV,
    isProduction,
    port: v.PORT,
    host: v.HOST,
    databaseUrl: v.DATABASE_URL,
    dataDir: v.DATA_DIR,
    jwtSecret: v.JWT_SECRET,
    twoFactorKey: v.TWO_FACTOR_KEY,
    twoFactorKeyPrevious: v.TWO_FACTOR_KEY_PREVIOUS,
    owner:
      v.OWNER_EMAIL && v.OWNER_PASSWORD
        ? {
            email: v.OWNER_EMAIL.toLowerCase(),
            password: v.OWNER_PASSWORD,
            name: v.OWNER_NAME,
            organizationName: v.ORGANIZATION_NAME,
          }
        : undefined,
    signupEnabled: v.SIGNUP_ENABLED,
    publicBaseUrl: (v.PUBLIC_BASE_URL ?? `${scheme}://${displayHost}:${v.PORT}`).replace(/\/+$/, ''),
    bcryptCost: v.BCRYPT_COST,
    trustProxy: v.TRUST_PROXY,
    tls,
    provisioningDelayMs: v.PROVISIONING_DELAY_MS,
    vpnAgentOfflineMs: v.VPN_AGENT_OFFLINE_MS,
    webhook: {
      allowPrivateTargets: v.WEBHOOK_ALLOW_PRIVATE_TARGETS,
      retryScheduleMs: v.WEBHOOK_RETRY_SCHEDULE ?? DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS,
      timeoutMs: v.WEBHOOK_TIMEOUT_MS,
      disableAfterMs: v.WEBHOOK_DISABLE_AFTER,
    },
    rateLimitBurst: v.RATE_LIMIT_BURST,
    eventStreamRecheckMs: v.EVENT_STREAM_RECHECK_INTERVAL,
    authRateLimit: {
      points: v.AUTH_RATE_LIMIT,
      windowSeconds: Math.max(1, Math.round(v.AUTH_RATE_LIMIT_WINDOW / 1000)),
    },
    redis: v.REDIS_URL ? { url: v.REDIS_URL, keyPrefix: v.REDIS_KEY_PREFIX } : undefined,
    auditLogEnabled: v.AUDIT_LOG_ENABLED,
    mail: v.MAIL_URL && v.MAIL_FROM ? { url: v.MAIL_URL, from: v.MAIL_FROM } : undefined,
    passwordResetTtlMs: v.PASSWORD_RESET_TTL,
    sessionMaxAgeMs: v.SESSION_MAX_AGE,
    sitesDomain: v.SITES_DOMAIN,
    dnsServers: v.DNS_SERVERS,
    hosting: {
      builder: v.BUILDER,
      sandbox: v.BUILD_SANDBOX,
      buildTimeoutMs: v.BUILD_TIMEOUT,
      buildConcurrency: v.BUILD_CONCURRENCY,
      buildMemoryLimit: v.BUILD_MEMORY_LIMIT,
      buildDiskLimit: v.BUILD_DISK_LIMIT,
      buildConcurrencyPerOrganization: v.BUILD_CONCURRENCY_PER_ORGANIZATION,
      buildLogMaxLines: v.BUILD_LOG_MAX_LINES,
      artifactsDir: v.ARTIFACTS_DIR ?? join(v.DATA_DIR, 'artifacts'),
      artifactMaxBytes: v.ARTIFACT_MAX_MB * 1_000_000,
      edge: v.EDGE_PORT !== undefined ? { port: v.EDGE_PORT, host: v.EDGE_HOST ?? v.HOST } : undefined,
    },
    databases: {
      backupIntervalMs: v.BACKUP_INTERVAL,
      deletionGraceMs: v.DATABASE_DELETION_GRACE,
      hosts: databaseHosts,
      backupDir: v.BACKUP_DIR ?? join(v.DATA_DIR, 'backups'),
      tools: { timeoutMs: v.DATABASE_TOOL_TIMEOUT, lockWaitMs: v.DATABASE_DUMP_LOCK_TIMEOUT },
      capacity: { reserve: v.DATABASE_CONNECTION_RESERVE, maxConnections: v.DATABASE_SERVER_MAX_CONNECTIONS },
    },
    billing: {
      period: v.BILLING_PERIOD,
      retryScheduleMs: v.BILLING_RETRY_SCHEDULE,
      taxRate: v.TAX_RATE,
      taxJurisdiction: v.TAX_JURISDICTION,
    },
    logLevel: v.LOG_LEVEL,
    corsOrigins: v.CORS_ORIGINS,
    ssoReturnOrigins: v.SSO_RETURN_ORIGINS,
  };
}
