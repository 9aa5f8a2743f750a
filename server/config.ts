import { z } from 'zod';
import { parseDurationList } from './lib/time.js';

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

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const ZEnv = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
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
  PUBLIC_BASE_URL: z.url('PUBLIC_BASE_URL must be an absolute URL').optional(),
  BCRYPT_COST: int('BCRYPT_COST', 4, 15).default(12),
  TRUST_PROXY: bool('TRUST_PROXY').default(false),
  TLS_CERT_FILE: z.string().trim().min(1).optional(),
  TLS_KEY_FILE: z.string().trim().min(1).optional(),
  PROVISIONING_DELAY_MS: int('PROVISIONING_DELAY_MS', 0, 3_600_000).default(2000),
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
  RATE_LIMIT_BURST: int('RATE_LIMIT_BURST', 1, 1_000_000).default(100),
  LOG_LEVEL: z
    .enum(LOG_LEVELS, { error: `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}` })
    .default('info'),
});

/** Default retry delays of webhook deliveries (conventions §8), in milliseconds. */
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
  owner: { email: string; password: string; name: string; organizationName: string } | undefined;
  signupEnabled: boolean;
  publicBaseUrl: string;
  bcryptCost: number;
  trustProxy: boolean;
  tls: { certFile: string; keyFile: string } | undefined;
  provisioningDelayMs: number;
  webhook: { allowPrivateTargets: boolean; retryScheduleMs: number[]; timeoutMs: number };
  rateLimitBurst: number;
  logLevel: (typeof LOG_LEVELS)[number];
}

export class ConfigError extends Error {
  constructor(public readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parses the environment once. Throws ConfigError listing every problem, one line each. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // An empty variable means "unset", as in most twelve-factor tooling.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const result = ZEnv.safeParse(cleaned);
  const problems: string[] = [];
  if (!result.success) {
    for (const issue of result.error.issues) {
      const key = String(issue.path[0] ?? '');
      const msg = issue.message.startsWith(key) ? issue.message : `${key}: ${issue.message}`;
      problems.push(msg);
    }
    throw new ConfigError(problems);
  }
  const e = result.data;
  const isProduction = e.NODE_ENV === 'production';
  if (isProduction && !e.JWT_SECRET) problems.push('JWT_SECRET is required when NODE_ENV=production');
  if (isProduction && e.BCRYPT_COST < 10)
    problems.push('BCRYPT_COST must be at least 10 when NODE_ENV=production');
  if (isProduction && e.WEBHOOK_ALLOW_PRIVATE_TARGETS)
    problems.push('WEBHOOK_ALLOW_PRIVATE_TARGETS cannot be true when NODE_ENV=production');
  if (Boolean(e.OWNER_EMAIL) !== Boolean(e.OWNER_PASSWORD))
    problems.push('OWNER_EMAIL and OWNER_PASSWORD must be set together');
  if (Boolean(e.TLS_CERT_FILE) !== Boolean(e.TLS_KEY_FILE))
    problems.push('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  if (problems.length) throw new ConfigError(problems);

  const displayHost = e.HOST === '0.0.0.0' || e.HOST === '::' ? 'localhost' : e.HOST;
  const scheme = e.TLS_CERT_FILE ? 'https' : 'http';
  return {
    nodeEnv: e.NODE_ENV,
    isProduction,
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.DATA_DIR,
    jwtSecret: e.JWT_SECRET,
    owner:
      e.OWNER_EMAIL && e.OWNER_PASSWORD
        ? {
            email: e.OWNER_EMAIL.toLowerCase(),
            password: e.OWNER_PASSWORD,
            name: e.OWNER_NAME,
            organizationName: e.ORGANIZATION_NAME,
          }
        : undefined,
    signupEnabled: e.SIGNUP_ENABLED,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `${scheme}://${displayHost}:${e.PORT}`).replace(/\/+$/, ''),
    bcryptCost: e.BCRYPT_COST,
    trustProxy: e.TRUST_PROXY,
    tls:
      e.TLS_CERT_FILE && e.TLS_KEY_FILE ? { certFile: e.TLS_CERT_FILE, keyFile: e.TLS_KEY_FILE } : undefined,
    provisioningDelayMs: e.PROVISIONING_DELAY_MS,
    webhook: {
      allowPrivateTargets: e.WEBHOOK_ALLOW_PRIVATE_TARGETS,
      retryScheduleMs: e.WEBHOOK_RETRY_SCHEDULE ?? DEFAULT_WEBHOOK_RETRY_SCHEDULE_MS,
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
    },
    rateLimitBurst: e.RATE_LIMIT_BURST,
    logLevel: e.LOG_LEVEL,
  };
}
