import { ChangeSetType, type EventSubscriber } from '@mikro-orm/core';
import pg from 'pg';
import type { Database, Em } from '../db/orm.js';
import type { Clock } from '../lib/time.js';
import { WakeSignal } from '../lib/wake-signal.js';
import { Event } from './event.entity.js';

/** An event as the relay hands it to its handlers. */
export interface OutboxEvent {
  id: string;
  /** Null for platform events (every organization). */
  organizationId: string | null;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

/**
 * Consumes a batch of committed events inside the relay's transaction (so that what it writes, e.g. webhook
 * deliveries, commits together with marking the events dispatched). No network I/O here.
 */
export type OutboxHandler = (em: Em, events: OutboxEvent[], now: Date) => Promise<unknown>;

export interface OutboxRelayOptions {
  /** Events claimed per transaction. */
  batchSize?: number;
  /** Sweep for events committed without a nudge (another process, a crash before the nudge). */
  sweepIntervalMs?: number;
}

interface RelayDeps {
  db: Database;
  clock: Clock;
  log: { error(o: object, m?: string): void; warn(o: object, m?: string): void };
}

const NOTIFY_CHANNEL = 'platform_events';

/**
 * Relays the transactional outbox: claims undispatched events (`FOR UPDATE SKIP LOCKED`, so several processes
 * can relay side by side without handing out an event twice), runs the handlers, marks the events dispatched,
 * all in one short transaction.
 *
 * Latency: an ORM subscriber nudges the relay right after a transaction that wrote events commits; on PostgreSQL
 * a trigger's NOTIFY also wakes the relays of other processes. A periodic sweep catches anything else, which
 * is what makes "committed, then the process died" deliver after restart.
 */
export class OutboxRelay {
  private readonly batchSize: number;
  private readonly sweepIntervalMs: number;
  private running = false;
  private loopDone: Promise<void> | undefined;
  private readonly signal = new WakeSignal();
  /** Events this process has relayed (for tests and metrics). */
  relayedCount = 0;
  private listener: pg.Client | undefined;
  private readonly afterRelay: Array<(count: number) => void> = [];
  private readonly txWithEvents = new WeakSet<object>();

  constructor(
    private readonly deps: RelayDeps,
    private readonly handlers: OutboxHandler[],
    opts: OutboxRelayOptions = {},
  ) {
    this.batchSize = opts.batchSize ?? 200;
    this.sweepIntervalMs = opts.sweepIntervalMs ?? 1000;
  }

  /** Called after each committed batch with the number of events relayed. */
  onRelayed(cb: (count: number) => void): void {
    this.afterRelay.push(cb);
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.deps.db.orm.em.getEventManager().registerSubscriber(this.commitSubscriber());
    if (this.deps.db.kind === 'postgresql') await this.listen();
    this.loopDone = this.loop();
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.nudge();
    await this.loopDone;
    const listener = this.listener;
    this.listener = undefined;
    if (listener) {
      // A connection that no longer answers must not hold up the shutdown.
      await Promise.race([
        listener.end().catch(() => undefined),
        new Promise((r) => setTimeout(r, 2000).unref()),
      ]);
    }
  }

  /** Asks the relay to look for events now. */
  nudge(): void {
    this.signal.nudge();
  }

  /** Relays one batch; returns how many events it took. */
  async relayOnce(): Promise<number> {
    const em = this.deps.db.orm.em.fork();
    const count = await em.transactional(async (tx) => {
      const rows = await tx.execute<
        {
          id: string;
          organization_id: string | null;
          type: string;
          data: unknown;
          created_at: Date | string;
        }[]
      >(
        `select "id", "organization_id", "type", "data", "created_at" from "events"
          where "dispatched_at" is null
          order by "seq"
          limit ? for update skip locked`,
        [this.batchSize],
      );
      if (rows.length === 0) return 0;
      // Read after the select: a time read before it could precede events committed in between, and their
      // deliveries would then look older than the events themselves (a `recover` window starting between the two
      // would miss them).
      const now = this.deps.clock.now();
      const events: OutboxEvent[] = rows.map((r) => ({
        id: r.id,
        organizationId: r.organization_id,
        type: r.type,
        data: (typeof r.data === 'string' ? JSON.parse(r.data) : r.data) as Record<string, unknown>,
        createdAt: new Date(r.created_at),
      }));
      for (const handler of this.handlers) await handler(tx, events, now);
      await tx.execute(
        `update "events" set "dispatched_at" = ? where "id" in (${events.map(() => '?').join(', ')})`,
        [now, ...events.map((e) => e.id)],
      );
      return events.length;
    });
    this.relayedCount += count;
    if (count > 0) for (const cb of this.afterRelay) cb(count);
    return count;
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (this.running) {
      this.signal.reset();
      let count = 0;
      try {
        count = await this.relayOnce();
        failures = 0;
      } catch (err) {
        failures++;
        this.deps.log.error({ err }, 'event relay failed; retrying');
      }
      if (!this.running) break;
      if (count >= this.batchSize && failures === 0) continue;
      const wait = failures > 0 ? Math.min(30_000, 500 * 2 ** Math.min(failures, 6)) : this.sweepIntervalMs;
      await this.signal.sleep(wait);
    }
  }

  /** Nudges the relay once a transaction (or a flush outside one) that wrote events has committed. */
  private commitSubscriber(): EventSubscriber {
    const hasNewEvents = (changeSets: Iterable<{ entity: unknown; type: ChangeSetType }>) => {
      for (const cs of changeSets) {
        if (cs.type === ChangeSetType.CREATE && cs.entity instanceof Event) return true;
      }
      return false;
    };
    return {
      afterFlush: ({ em, uow }) => {
        if (!this.running || !hasNewEvents(uow.getChangeSets())) return;
        const tx = em.isInTransaction() ? em.getTransactionContext<object>() : undefined;
        if (tx) this.txWithEvents.add(tx);
        else this.nudge();
      },
      afterTransactionCommit: ({ transaction }) => {
        if (transaction && this.txWithEvents.has(transaction)) {
          this.txWithEvents.delete(transaction);
          this.nudge();
        }
      },
    };
  }

  /** LISTEN on a dedicated connection; reconnects after errors. */
  private async listen(): Promise<void> {
    const url = this.deps.db.orm.config.get('clientUrl');
    if (!url || !this.running) return;
    const client = new pg.Client({ connectionString: url });
    const retry = () => {
      if (this.listener !== client) return;
      this.listener = undefined;
      client.end().catch(() => undefined);
      if (this.running) setTimeout(() => void this.listen(), 1000).unref();
    };
    client.on('error', (err) => {
      this.deps.log.warn({ err }, 'event notification listener lost; reconnecting');
      retry();
    });
    client.on('notification', () => this.nudge());
    try {
      this.listener = client;
      await client.connect();
      await client.query(`listen ${NOTIFY_CHANNEL}`);
      // Anything committed while we were not listening is found by the next sweep; nudge to make it now.
      this.nudge();
    } catch (err) {
      this.deps.log.warn({ err }, 'could not listen for event notifications; relying on the sweep');
      retry();
    }
  }
}
