import { apiCallsSince, apiUsageSince } from '../limits/api-usage.js';
import { Organization } from '../access/organization.entity.js';
import { LoginSession, LoginThrottle, RefreshToken } from '../access/session.entity.js';
import { User } from '../access/user.entity.js';
import { ORGANIZATION_EVENTS } from '../access/organization.events.js';
import { USER_EVENTS } from '../access/user.events.js';
import { BaseSchema } from '../db/base.entity.js';
import { compactListCounts } from '../db/list-counts.js';
import { Migration20261121000001_foundation } from '../db/migrations/Migration20261121000001_foundation.js';
import { Migration20261121000005_api_usage } from '../db/migrations/Migration20261121000005_api_usage.js';
import { Migration20261121000006_plan_status } from '../db/migrations/Migration20261121000006_plan_status.js';
import { Migration20261124000001_audit_logs } from '../db/migrations/Migration20261124000001_audit_logs.js';
import { Migration20261124000021_idempotency } from '../db/migrations/Migration20261124000021_idempotency.js';
import { Migration20261124000030_list_counts } from '../db/migrations/Migration20261124000030_list_counts.js';
import { Migration20261126000110_idempotency_caller } from '../db/migrations/Migration20261126000110_idempotency_caller.js';
import { Migration20261127000010_event_sequence } from '../db/migrations/Migration20261127000010_event_sequence.js';
import { Migration20261127000020_list_count_shards } from '../db/migrations/Migration20261127000020_list_count_shards.js';
import { AuditLog } from '../events/audit-log.entity.js';
import { IdempotencyRecord, purgeIdempotencyRecords } from '../access/idempotency-record.entity.js';
import { Event } from '../events/event.entity.js';
import { OutboxRelay } from '../events/outbox.js';
import { pruneDispatchedEvents } from '../events/record-event.js';
import type { AppDeps } from './deps.js';
import { defineJob, noPayload } from './jobs.js';
import { defineModule } from './module.js';

/** The name of the outbox relay worker. */
export const OUTBOX_RELAY = 'events.relay';

export const pruneDispatchedEventsJob = defineJob(
  'events.prune-dispatched',
  async (deps) => {
    const n = await pruneDispatchedEvents(deps.db.orm.em.fork(), deps.clock.now());
    if (n > 0) deps.log.info({ pruned: n }, 'pruned relayed events');
  },
  { cron: '41 3 * * *', payload: noPayload },
);

/** Idempotency records are kept 24 hours (docs/api-conventions.md, "Idempotency"): expired ones are removed every hour. */
export const purgeIdempotencyRecordsJob = defineJob(
  'core.purge-idempotency-records',
  async (deps) => {
    const n = await purgeIdempotencyRecords(deps.db.orm.em.fork(), deps.clock.now());
    if (n > 0) deps.log.info({ purged: n }, 'purged expired idempotency records');
  },
  { cron: '17 * * * *', payload: noPayload },
);

/** The list counts' shards are folded every ten minutes (docs/api-conventions.md, "Lists"). */
export const compactListCountsJob = defineJob(
  'core.compact-list-counts',
  async (deps) => {
    const n = await compactListCounts(deps.db.orm.em.fork());
    if (n > 0) deps.log.debug({ keys: n }, 'folded list count shards');
  },
  { cron: '*/10 * * * *', payload: noPayload },
);

const monthStart = (now: Date) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));

/**
 * What every module stands on: organizations, users and their login sessions, the event outbox and its relay, the
 * API call counters. Listed last in server/modules.ts, so that its relay starts after the workers that consume
 * what it relays (and stops before them).
 */
export const coreModule = defineModule({
  name: 'core',
  // The answers kept for idempotent replays (docs/security.md, "Encryption at rest").
  atRest: [
    {
      table: 'idempotency_records',
      column: 'body',
      key: 'idempotency',
      rowKey: ['organization_id', 'caller_id', 'key'],
    },
  ],
  entities: [
    BaseSchema,
    Organization,
    User,
    LoginSession,
    RefreshToken,
    LoginThrottle,
    Event,
    AuditLog,
    IdempotencyRecord,
  ],
  migrations: [
    { name: 'Migration20261121000001_foundation', class: Migration20261121000001_foundation },
    { name: 'Migration20261121000005_api_usage', class: Migration20261121000005_api_usage },
    { name: 'Migration20261121000006_plan_status', class: Migration20261121000006_plan_status },
    { name: 'Migration20261124000001_audit_logs', class: Migration20261124000001_audit_logs },
    { name: 'Migration20261124000021_idempotency', class: Migration20261124000021_idempotency },
    { name: 'Migration20261124000030_list_counts', class: Migration20261124000030_list_counts },
    {
      name: 'Migration20261126000110_idempotency_caller',
      class: Migration20261126000110_idempotency_caller,
    },
    { name: 'Migration20261127000010_event_sequence', class: Migration20261127000010_event_sequence },
    { name: 'Migration20261127000020_list_count_shards', class: Migration20261127000020_list_count_shards },
  ],
  jobs: [pruneDispatchedEventsJob, purgeIdempotencyRecordsJob, compactListCountsJob],
  workers: [
    {
      name: OUTBOX_RELAY,
      async start(deps: AppDeps) {
        const consumers = deps.registry.outboxConsumers;
        const relay = new OutboxRelay(
          deps,
          consumers.map((c) => c.handle),
        );
        relay.onRelayed(() => {
          for (const c of consumers) c.afterCommit?.(deps);
        });
        await relay.start();
        return relay;
      },
    },
  ],
  events: [...USER_EVENTS, ...ORGANIZATION_EVENTS],
  // Run after every other module's (the core is last in server/modules.ts): users and the organization go last.
  organizationRows: {
    remove: [
      { table: 'events' },
      { table: 'audit_logs' },
      { table: 'api_calls_daily' },
      { table: 'idempotency_records' },
      {
        table: 'refresh_tokens',
        where: `"session_id" in (select s."id" from "login_sessions" s join "users" u on u."id" = s."user_id" where u."organization_id" = ?)`,
      },
      {
        table: 'login_sessions',
        where: `"user_id" in (select "id" from "users" where "organization_id" = ?)`,
      },
      { table: 'users' },
      // The organization's lists' counts, after every row they count (deleting those rows updates them). Shards
      // written by other connections than the deleting one are left at ±n summing to 0: this removes them (those of
      // a site's or a database's lists go with the compaction job, docs/api-conventions.md "Lists").
      { table: 'list_counts', where: '"scope_id" = ?' },
      { table: 'organizations', where: `"id" = ?` },
    ],
    keep: {
      login_throttles: 'failed sign-ins per email and address, kept 15 minutes whatever the organization',
    },
    // Events of the organization not relayed yet: their deliveries do not exist yet.
    async busy(em, organizationId) {
      const rows = await em.execute<{ n: number }[]>(
        `select count(*)::int as n from "events" where "organization_id" = ? and "dispatched_at" is null`,
        [organizationId],
      );
      return Number(rows[0]?.n ?? 0) > 0;
    },
  },
  notOwnedByUser: {
    LoginSession: 'a login of the user: revoked when the user is deleted, never handed to someone else',
  },
  usage: [
    {
      feature: 'api_calls',
      count: (em, organizationId, now) => apiCallsSince(em, { organizationId, since: monthStart(now) }),
    },
  ],
  // API requests served and refused by the burst limit, from the request counters (whole UTC days from the
  // period's first day on).
  usageReport: {
    metrics: ['api.requests', 'api.rate_limit_hits'],
    async report(em, organizationId, period) {
      const u = await apiUsageSince(em, { organizationId, since: period.start });
      return { 'api.requests': u.calls, 'api.rate_limit_hits': u.rateLimited };
    },
  },
});
