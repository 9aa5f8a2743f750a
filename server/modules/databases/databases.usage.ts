import type { Em } from '../../db/orm.js';
import { countedRows } from '../../db/list-counts.js';
import type { AddOnUsage, UsageCounter, UsagePeriod, UsageReporter } from '../../kit/usage.js';
import { SIZE_SPECS, type DatabaseSize } from './databases.constants.js';
import { DATABASES_TABLES, usagePeriodRows } from './databases.repository.js';

/**
 * What databases count against the plan (`databases`): those not removed and not being deleted. A database whose
 * deletion is canceled counts again (cancel-deletion checks the plan first).
 */
export const databasesUsageCounter: UsageCounter = {
  feature: 'databases',
  // From the list's maintained counts (docs/api-conventions.md, "Lists"): `d2` is the status; removed databases are not counted.
  count: (em, organizationId) =>
    countedRows(em, DATABASES_TABLES.databases, organizationId, `"d2" <> 'deleting'`),
};

/**
 * The billable periods of the organization's databases that overlap `[start, end)`, clipped to it and to `now`
 * (database-usage-period.entity.ts: a period per size, from creation, or the cancel of a deletion, to the
 * deletion request).
 */
async function periodsIn(em: Em, organizationId: string, period: UsagePeriod, now: Date) {
  const rows = await usagePeriodRows(em, organizationId, period);
  const until = Math.min(period.end.getTime(), now.getTime());
  return rows.map((r) => {
    const started = Number(r.started_ms);
    const ended = r.ended_ms === null ? null : Number(r.ended_ms);
    const from = Math.max(started, period.start.getTime());
    const to = Math.min(ended ?? Number.POSITIVE_INFINITY, until);
    return { ...r, started, ended, ms: Math.max(0, to - from) };
  });
}

/**
 * `database.instances` and `database.storage_gb`: the databases billed at the end of the period (at `now` for the
 * current one), and the storage of their sizes (1 TB = 1,000 GB); `database.compute_hours`: each size's vCPUs ×
 * the hours it was billed in the period. `addOns`: one line per database and size, its monthly price prorated to
 * the seconds billed in the period. A database being deleted is not billed (nor counted) during its grace period.
 */
export const databasesUsageReporter: UsageReporter = {
  metrics: ['database.instances', 'database.storage_gb', 'database.compute_hours'],

  async report(em, organizationId, period, now) {
    const rows = await periodsIn(em, organizationId, period, now);
    // The current period: what is billed now (as the plan counter counts it). A closed one: what was billed
    // until its end.
    const current = now.getTime() < period.end.getTime();
    const end = period.end.getTime();
    const billed = (r: { started: number; ended: number | null }) =>
      current
        ? r.started <= now.getTime() && (r.ended === null || r.ended > now.getTime())
        : r.started < end && (r.ended === null || r.ended >= end);
    const live = new Map<string, DatabaseSize>();
    let computeHours = 0;
    for (const r of rows) {
      if (billed(r)) live.set(r.database_id, r.size);
      computeHours += (SIZE_SPECS[r.size].vcpus * r.ms) / 3_600_000;
    }
    let storage = 0;
    for (const size of live.values()) storage += SIZE_SPECS[size].storageGb;
    return {
      'database.instances': live.size,
      'database.storage_gb': storage,
      'database.compute_hours': Math.round(computeHours * 100) / 100,
    };
  },

  async addOns(em, organizationId, period, now) {
    const rows = await periodsIn(em, organizationId, period, now);
    const lines = new Map<string, AddOnUsage & { ms: number }>();
    for (const r of rows) {
      const key = `${r.database_id}|${r.size}`;
      const line = lines.get(key) ?? {
        resourceId: r.database_id,
        description: `Database ${r.name} (${r.size})`,
        monthlyPriceCents: SIZE_SPECS[r.size].monthlyPriceCents,
        seconds: 0,
        ms: 0,
      };
      line.ms += r.ms;
      lines.set(key, line);
    }
    return [...lines.values()]
      .map(({ ms, ...line }) => ({ ...line, seconds: Math.round(ms / 1000) }))
      .filter((line) => line.seconds > 0);
  },
};
