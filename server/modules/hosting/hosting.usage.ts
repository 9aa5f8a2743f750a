import type { Em } from '../../db/orm.js';
import type { UsagePeriod, UsageReporter } from '../../kit/usage.js';
import { usageRows } from './hosting.repository.js';
import { trafficBetween } from './hosting.simulation.js';

/**
 * The hosting part of the usage report (server/kit/usage.ts), from the module's own records:
 *
 * - `hosting.sites`: sites of the organization now (or at the end of a past period);
 * - `hosting.build_minutes`: build time (`started_at` → `completed_at`, or now for a build still running) within
 *   the period, of every build, those of deleted sites included (hosting_usage_records keeps them);
 * - `hosting.bandwidth_gb`: bytes the sites served within the period (up to now), by the traffic simulation of the
 *   detail view's `metrics` (hosting.simulation.ts), deleted sites included for the time they served. 1 GB = 10⁹ bytes.
 */

const overlapMs = (start: Date, end: Date, period: { start: Date; end: Date }) =>
  Math.max(
    0,
    Math.min(end.getTime(), period.end.getTime()) - Math.max(start.getTime(), period.start.getTime()),
  );

const toDate = (v: Date | string | number) => (v instanceof Date ? v : new Date(v));

export const hostingUsageReporter: UsageReporter = {
  metrics: ['hosting.sites', 'hosting.build_minutes', 'hosting.bandwidth_gb'],

  async report(em: Em, organizationId: string, period: UsagePeriod, now: Date) {
    const until = new Date(Math.min(period.end.getTime(), now.getTime()));
    const window = { start: period.start, end: until };

    const { sites, records, running } = await usageRows(em, organizationId, window);

    let buildMs = 0;
    let bytes = 0;
    for (const r of records) {
      if (r.kind === 'build') buildMs += overlapMs(toDate(r.started_at), toDate(r.ended_at), window);
      else {
        bytes += trafficBetween(
          r.site_id,
          { from: window.start, to: window.end },
          { liveSince: toDate(r.started_at), until: toDate(r.ended_at) },
        ).bytes;
      }
    }
    for (const r of running) buildMs += overlapMs(toDate(r.started_at), until, window);
    for (const s of sites) {
      if (!s.live_since) continue;
      bytes += trafficBetween(
        s.id,
        { from: window.start, to: window.end },
        { liveSince: toDate(s.live_since) },
      ).bytes;
    }
    return {
      'hosting.sites': sites.filter((s) => toDate(s.created_at) < period.end).length,
      'hosting.build_minutes': Math.round((buildMs / 60_000) * 100) / 100,
      'hosting.bandwidth_gb': Math.round((bytes / 1e9) * 1000) / 1000,
    };
  },
};
