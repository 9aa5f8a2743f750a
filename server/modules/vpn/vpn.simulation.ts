import { randomInt } from 'node:crypto';

/**
 * Simulated traffic of an active connection (no real tunnel exists, docs/vpn.md, "VPN"). When a connection becomes
 * active it draws a steady rate: upload 2 to 24 KiB/s, download 3 to 12 times that (browsing-like). While active,
 * its totals are the totals at the start of the session plus rate × time since `connected_at`, and
 * `last_activity` is the time of reading. A periodic job and every state change store those values, so what is
 * stored never exceeds what a read reports, and reads never go backwards.
 */
export function drawTrafficRates(): { uploadRate: number; downloadRate: number } {
  const uploadRate = randomInt(2 * 1024, 24 * 1024 + 1);
  return { uploadRate, downloadRate: uploadRate * randomInt(3, 13) };
}

export interface UsageState {
  status: string;
  connectedAt?: Date | null;
  lastActivity?: Date | null;
  uploadBytes: number;
  downloadBytes: number;
  sessionUploadBase: number;
  sessionDownloadBase: number;
  uploadRate: number;
  downloadRate: number;
}

export interface Usage {
  upload: number;
  download: number;
  lastActivity: Date | null;
}

/** Usage as of `now`. The same formula runs in SQL in the periodic job (vpn.jobs.ts, through vpn.repository.ts). */
export function projectUsage(c: UsageState, now: Date): Usage {
  // A connection on an agent server has no simulated rate: its totals and activity are the agent's reports.
  if (c.status !== 'active' || !c.connectedAt || (c.uploadRate === 0 && c.downloadRate === 0)) {
    return { upload: c.uploadBytes, download: c.downloadBytes, lastActivity: c.lastActivity ?? null };
  }
  const ms = Math.max(0, now.getTime() - c.connectedAt.getTime());
  const last = c.lastActivity && c.lastActivity > now ? c.lastActivity : now;
  return {
    upload: Math.max(c.uploadBytes, c.sessionUploadBase + Math.floor((c.uploadRate * ms) / 1000)),
    download: Math.max(c.downloadBytes, c.sessionDownloadBase + Math.floor((c.downloadRate * ms) / 1000)),
    lastActivity: last,
  };
}

/** Stores the usage of an active connection as of `now` (before it leaves `active`). */
export function storeUsage(c: UsageState, now: Date): void {
  const u = projectUsage(c, now);
  c.uploadBytes = u.upload;
  c.downloadBytes = u.download;
  c.lastActivity = u.lastActivity;
}

/** Starts a session: totals so far become the session base, new rates are drawn. */
export function startSession(c: UsageState, now: Date): void {
  const rates = drawTrafficRates();
  c.connectedAt = now;
  c.lastActivity = now;
  c.sessionUploadBase = c.uploadBytes;
  c.sessionDownloadBase = c.downloadBytes;
  c.uploadRate = rates.uploadRate;
  c.downloadRate = rates.downloadRate;
}
