import { createHash } from 'node:crypto';
import { middlewareMarker } from '@trpc/server/unstable-core-do-not-import';
import type { Actor } from '../access/actor.js';
import type { Em } from '../db/orm.js';
import { decryptSecret, encryptSecret } from '../lib/crypto.js';
import { AppError, ERROR_STATUS, type ErrorCode, type ErrorDetail } from '../lib/errors.js';
import type { Context } from './context.js';
import { toAppError, type Meta } from './init.js';

/**
 * Idempotency keys (docs/api-conventions.md, "Idempotency"). A kept answer belongs to the caller that got it: it is stored under the
 * organization, the caller (the user, or the API key: `callerOf`) and the key, and found by the three, so the same
 * key sent by anyone else is a request of its own, checked, run and audited like any other, and never learns that
 * the key was used. Its body is stored encrypted (AES-256-GCM, `deps.keys.idempotency`): answers may show a secret
 * once (an API key, a database password, a TOTP secret).
 *
 * A request sent with `Idempotency-Key` to an authenticated POST (or
 * `PUT /billing/subscription`) runs its procedure inside one transaction that also inserts the record of its
 * answer, so a change is never committed without its record nor a record without its change: a crash between the
 * change and the answer leaves both or neither, and the retry replays or runs once. The procedure's own
 * transactions become savepoints of that one.
 *
 * Concurrent duplicates never both run: a process answers 409 at once for a key it is already running (a set in
 * memory, checked before any query), and across processes the transaction first takes a transaction-scoped advisory
 * lock on the organization, caller and key without waiting (`pg_try_advisory_xact_lock`): 409 if another process
 * holds it; once holding it, a record committed meanwhile is found and replayed.
 *
 * Procedures that must not hold a transaction across their work (an outbound HTTP call, a password hash) declare
 * `idempotency: 'after-commit'`: their record is written right after they answer, in a transaction of its own.
 */

export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
/** 1–255 printable ASCII characters (docs/api-conventions.md, "Idempotency"). */
const KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;
/** Answers that are not kept, so that the key can be used again (a corrected body, a retry after a 429 or 5xx). */
const NOT_KEPT = new Set([400, 401, 403, 409, 429]);

/** Whether a procedure takes an `Idempotency-Key`: every authenticated POST, and the subscription change. */
export function takesIdempotencyKey(meta: Meta | undefined): boolean {
  const openapi = meta?.openapi;
  if (!openapi || meta.auth === 'public') return false;
  return openapi.method === 'POST' || (openapi.method === 'PUT' && openapi.path === '/billing/subscription');
}

/** JSON with object keys sorted at every level: two bodies that differ only by key order are the same request. */
function canonicalJson(value: unknown): string {
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/**
 * What identifies a request: the procedure (one per method and path, on `/v1` and `/trpc` alike) and its input
 * (body merged with the path parameters).
 */
function fingerprintOf(procedure: string, rawInput: unknown): string {
  return createHash('sha256').update(procedure).update('\n').update(canonicalJson(rawInput)).digest('hex');
}

interface StoredRecord {
  procedure: string;
  fingerprint: string;
  status: number;
  body: string;
}

const SELECT_SQL = `select "procedure", "fingerprint", "status", "body" from "idempotency_records"
  where "organization_id" = ? and "caller_id" = ? and "key" = ? and "expires_at" > ?`;

const UPSERT_SQL = `insert into "idempotency_records"
  ("organization_id", "caller_id", "key", "procedure", "fingerprint", "status", "body", "created_at", "expires_at")
  values (?, ?, ?, ?, ?, ?, ?, ?, ?)
  on conflict ("organization_id", "caller_id", "key") do update set "procedure" = excluded."procedure",
    "fingerprint" = excluded."fingerprint", "status" = excluded."status", "body" = excluded."body",
    "created_at" = excluded."created_at", "expires_at" = excluded."expires_at"`;

/** Whose kept answers a caller gets: an API key's own (`key_…`), else the user's (whatever their session). */
export function callerOf(actor: Actor): string {
  return actor.apiKeyId ?? actor.userId;
}

interface Scope {
  organizationId: string;
  callerId: string;
  key: string;
}

async function findRecord(em: Em, scope: Scope, now: Date) {
  const rows = await em.execute<StoredRecord[]>(SELECT_SQL, [
    scope.organizationId,
    scope.callerId,
    scope.key,
    now,
  ]);
  return rows[0];
}

/** Keys being run by each server (organization, caller and key), found from its dependencies. */
const inFlightOf = new WeakMap<object, Set<string>>();
function inFlightSet(ctx: Context): Set<string> {
  let set = inFlightOf.get(ctx.deps);
  if (!set) inFlightOf.set(ctx.deps, (set = new Set()));
  return set;
}

/** The minimal shape of a tRPC middleware result that this module reads and makes. */
type CallResult = { ok: true; data: unknown } | { ok: false; error: unknown };

interface Answer {
  status: number;
  body: unknown;
}

/** The answer a call gave, as the transport sends it (success body, or the error envelope). */
function answerOf(ctx: Context, meta: Meta | undefined, result: CallResult): Answer {
  if (result.ok) return { status: meta?.successStatus ?? 200, body: result.data };
  const app = toAppError(result.error);
  return {
    status: ERROR_STATUS[app.code],
    body: {
      success: false,
      error: {
        code: app.code,
        message: app.message,
        ...(app.details ? { details: app.details } : {}),
        request_id: ctx.requestId,
      },
    },
  };
}

const isKept = (status: number) => status < 500 && !NOT_KEPT.has(status);

/** The stored answer as the call's result, marked as a replay. */
function replay(ctx: Context, record: StoredRecord): CallResult {
  const body = JSON.parse(decryptSecret(ctx.deps.keys.idempotency, record.body)) as unknown;
  ctx.response.headers['Idempotent-Replayed'] = 'true';
  if (record.status < 400) return { ok: true, data: body };
  ctx.replayedError = { status: record.status, body };
  const error = (body as { error: { code: ErrorCode; message: string; details?: ErrorDetail[] } }).error;
  return {
    ok: false,
    error: new AppError(error.code, error.message, error.details ? { details: error.details } : {}),
  };
}

function reusedKey(): AppError {
  return new AppError(
    'IDEMPOTENCY_KEY_REUSED',
    'This Idempotency-Key was already used for a different request (method, path or body)',
  );
}

function inFlightConflict(): AppError {
  return new AppError(
    'CONFLICT',
    'A request with this Idempotency-Key is still being processed; retry once it has been answered',
  );
}

/** The stored answer for this request, or 422 if the caller used the key for another one. */
function replayOrRefuse(ctx: Context, record: StoredRecord, procedure: string, fingerprint: string) {
  if (record.procedure !== procedure || record.fingerprint !== fingerprint) throw reusedKey();
  return replay(ctx, record);
}

/**
 * Runs `run` (the rest of the procedure's middleware chain) under the request's `Idempotency-Key`. Returns the
 * call's result, tRPC's middleware marker included, and whether it was a replay (nothing ran: no audit entry).
 * Throws AppError for a malformed key (400), a key the caller used for another request (422) or one in flight (409).
 */
export async function runIdempotent<R extends CallResult>(
  ctx: Context,
  call: { path: string; meta: Meta | undefined; rawInput: unknown; actor: Actor; key: string },
  run: () => Promise<R>,
): Promise<{ result: R; replayed: boolean }> {
  const { path, meta, rawInput, actor, key } = call;
  if (!KEY_PATTERN.test(key)) {
    throw new AppError('VALIDATION_ERROR', 'Invalid Idempotency-Key: 1 to 255 printable ASCII characters', {
      details: [{ path: 'Idempotency-Key', message: 'Expected 1 to 255 printable ASCII characters' }],
    });
  }
  const scope: Scope = { organizationId: actor.organizationId, callerId: callerOf(actor), key };
  const slot = `${scope.organizationId}\n${scope.callerId}\n${key}`;
  const inFlight = inFlightSet(ctx);
  if (inFlight.has(slot)) throw inFlightConflict();
  inFlight.add(slot);
  const fingerprint = fingerprintOf(path, rawInput);
  const marked = (r: CallResult) => ({ ...r, marker: middlewareMarker }) as unknown as R;
  const base = ctx.em;
  try {
    // The common repeat (a retry after a timeout) is answered without opening a transaction.
    const found = await findRecord(base, scope, ctx.deps.clock.now());
    if (found) return { result: marked(replayOrRefuse(ctx, found, path, fingerprint)), replayed: true };

    const keep = async (em: Em, result: CallResult) => {
      const answer = answerOf(ctx, meta, result);
      if (!isKept(answer.status)) return;
      const now = ctx.deps.clock.now();
      await em.execute(
        UPSERT_SQL,
        [
          scope.organizationId,
          scope.callerId,
          key,
          path,
          fingerprint,
          answer.status,
          encryptSecret(ctx.deps.keys.idempotency, JSON.stringify(answer.body)),
          now,
          new Date(now.getTime() + IDEMPOTENCY_TTL_MS),
        ],
        'run',
      );
    };

    if (meta?.idempotency === 'after-commit') {
      const result = await run();
      await keep(ctx.deps.db.orm.em.fork(), result);
      return { result, replayed: false };
    }

    return await base.transactional(async (tx) => {
      const [lock] = await tx.execute<{ locked: boolean }[]>(
        'select pg_try_advisory_xact_lock(hashtextextended(?, 0)) as locked',
        [`idempotency\n${slot}`],
      );
      if (!lock?.locked) throw inFlightConflict();
      const committed = await findRecord(tx, scope, ctx.deps.clock.now());
      if (committed) {
        return { result: marked(replayOrRefuse(ctx, committed, path, fingerprint)), replayed: true };
      }
      ctx.em = tx;
      try {
        const result = await run();
        await keep(tx, result);
        return { result, replayed: false };
      } finally {
        ctx.em = base;
      }
    });
  } finally {
    inFlight.delete(slot);
  }
}
