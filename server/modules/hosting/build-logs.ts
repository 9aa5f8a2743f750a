import { repositoryOf, runtimeOf } from '../../kit/runtime.js';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Em } from '../../db/orm.js';
import type { AppDeps } from '../../kit/deps.js';
import type { EventSink } from '../../lib/event-stream.js';
import { FINAL_DEPLOYMENT_STATUSES, MAX_LOG_LIMIT, type DeploymentStatus } from './hosting.constants.js';
import type { BuildOutput } from './hosting.driver.js';
import type { HostingDeployment } from './hosting-deployment.entity.js';
import type { TLogLine } from './hosting.schema.js';

/**
 * Build logs: lines are appended by the build steps (builds.service.ts) in the transaction of the step, and followed
 * live over Server-Sent Events.
 *
 * Followers never poll. Every process has one {@link BuildLogHub}: the writer hands it the lines it committed
 * (in-process followers get them without a query), and on PostgreSQL the writer's transaction also sends a
 * `NOTIFY hosting_build_logs` that the hubs of the other processes receive on one shared `LISTEN` connection; such
 * a hub reads the announced lines once and hands them to all of its followers of that deployment. A follower that
 * sees a gap in the numbering (announcements of other processes may overtake each other) reads what it missed
 * from the table before going on.
 */

const CHANNEL = 'hosting_build_logs';

/** Longest line stored, in characters; a build's longer lines are written in pieces of this length (build-process.ts). */
export const LOG_LINE_MAX_CHARS = 4096;

/** The last line of a log that reached `BUILD_LOG_MAX_LINES` (docs/hosting.md, "Build logs"). */
export function logCutMessage(maxLines: number): string {
  return `The log was cut at ${maxLines} lines (BUILD_LOG_MAX_LINES); later output is not kept, the build goes on`;
}

// NUL cannot be stored in a text column (PostgreSQL refuses the whole statement), and an unpaired surrogate is no
// character at all; both become U+FFFD, as invalid UTF-8 already has when the output was decoded.
// eslint-disable-next-line no-control-regex -- NUL is what is looked for
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** A message as it can be stored: unstorable characters replaced, at most {@link LOG_LINE_MAX_CHARS} long. */
export function storableLogMessage(message: string): string {
  let m = message;
  if (m.length > LOG_LINE_MAX_CHARS) {
    // Not between the two halves of a surrogate pair.
    const end = /[\uD800-\uDBFF]/.test(m[LOG_LINE_MAX_CHARS - 1]!)
      ? LOG_LINE_MAX_CHARS - 1
      : LOG_LINE_MAX_CHARS;
    m = m.slice(0, end);
  }
  return m.replace(UNSTORABLE, '\uFFFD');
}

/**
 * The one way lines enter a deployment's log (inside `tx`, which holds the site's row lock, as the numbering of
 * lines depends on it): each message made storable, and at most `BUILD_LOG_MAX_LINES` lines kept, then one line
 * saying the log was cut; lines past it are dropped. Advances `d.logSeq`; returns the lines written.
 */
export async function appendBuildLog(
  deps: AppDeps,
  tx: Em,
  d: HostingDeployment,
  output: readonly BuildOutput[],
  now: Date,
): Promise<TLogLine[]> {
  const max = deps.config.hosting.buildLogMaxLines;
  const room = max - d.logSeq;
  if (output.length === 0 || room < 0) return [];
  const kept: BuildOutput[] = output
    .slice(0, room)
    .map((o) => ({ stream: o.stream, message: storableLogMessage(o.message) }));
  if (output.length > room) kept.push({ stream: 'stderr', message: logCutMessage(max) });
  const lines = await repositoryOf(deps, 'hosting').appendLogLines(tx, d.id, d.logSeq, kept, now);
  d.logSeq += lines.length;
  return lines;
}

/** What a hub hands its followers: lines of one deployment, and its final status once it has one. */
export interface LogEvent {
  deploymentId: string;
  lines: TLogLine[];
  status?: DeploymentStatus;
}

type Listener = (e: LogEvent | 'closing') => void;

interface Announcement {
  /** The hub that wrote it (its own announcements are already delivered locally). */
  o: string;
  d: string;
  /** First and last `seq` written (0, 0 when none). */
  f: number;
  t: number;
  s?: DeploymentStatus;
}

/** The hub of this process's followers: `runtimeOf(deps, 'hosting').logHub`, built by the module's `create`. */
export class BuildLogHub {
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly origin = randomUUID();
  private client: pg.Client | undefined;
  private listening = false;

  constructor(private readonly deps: AppDeps) {}

  /** Followers registered now (all deployments, or one). */
  listenerCount(deploymentId?: string): number {
    if (deploymentId) return this.listeners.get(deploymentId)?.size ?? 0;
    let n = 0;
    for (const set of this.listeners.values()) n += set.size;
    return n;
  }

  subscribe(deploymentId: string, listener: Listener): () => void {
    let set = this.listeners.get(deploymentId);
    if (!set) {
      set = new Set();
      this.listeners.set(deploymentId, set);
    }
    set.add(listener);
    return () => {
      const current = this.listeners.get(deploymentId);
      if (!current) return;
      current.delete(listener);
      if (current.size === 0) this.listeners.delete(deploymentId);
    };
  }

  /** Hands committed lines (and a final status) to this process's followers. */
  publish(e: LogEvent): void {
    const set = this.listeners.get(e.deploymentId);
    if (!set) return;
    for (const listener of [...set]) {
      try {
        listener(e);
      } catch (err) {
        this.deps.log.error({ err, deployment: e.deploymentId }, 'build log follower failed');
      }
    }
  }

  /**
   * Inside the writer's transaction: on PostgreSQL, announces the lines to the other processes at commit
   * (`pg_notify` is transactional: a rolled-back step announces nothing). Nothing on PGlite (one process).
   */
  async announce(tx: Em, e: LogEvent): Promise<void> {
    const a: Announcement = {
      o: this.origin,
      d: e.deploymentId,
      f: e.lines[0]?.seq ?? 0,
      t: e.lines.at(-1)?.seq ?? 0,
      ...(e.status ? { s: e.status } : {}),
    };
    await repositoryOf(this.deps, 'hosting').notify(tx, CHANNEL, JSON.stringify(a));
  }

  /** LISTEN on one connection of its own (PostgreSQL only); reconnects after errors. */
  async start(): Promise<void> {
    if (this.deps.db.kind !== 'postgresql' || this.listening) return;
    this.listening = true;
    await this.connect();
  }

  /** Stops listening and ends every follower's stream (they may reconnect to another process). */
  async stop(): Promise<void> {
    this.listening = false;
    const client = this.client;
    this.client = undefined;
    for (const set of [...this.listeners.values()]) for (const l of [...set]) l('closing');
    this.listeners.clear();
    if (client) {
      await Promise.race([
        client.end().catch(() => undefined),
        new Promise((r) => setTimeout(r, 2000).unref()),
      ]);
    }
  }

  private async connect(): Promise<void> {
    const url = this.deps.db.orm.config.get('clientUrl');
    if (!url || !this.listening) return;
    const client = new pg.Client({ connectionString: url, application_name: 'hosting-logs' });
    const retry = () => {
      if (this.client !== client) return;
      this.client = undefined;
      client.end().catch(() => undefined);
      if (this.listening) setTimeout(() => void this.connect(), 1000).unref();
    };
    client.on('error', (err) => {
      this.deps.log.warn({ err }, 'build log listener lost; reconnecting');
      retry();
    });
    client.on('notification', (msg) => {
      if (msg.channel === CHANNEL && msg.payload) void this.received(msg.payload);
    });
    try {
      this.client = client;
      await client.connect();
      await client.query(`listen ${CHANNEL}`);
    } catch (err) {
      this.deps.log.warn({ err }, 'could not listen for build log notifications; retrying');
      retry();
    }
  }

  /** An announcement of another process: read the lines once for every local follower of the deployment. */
  private async received(payload: string): Promise<void> {
    let a: Announcement;
    try {
      a = JSON.parse(payload) as Announcement;
    } catch {
      return;
    }
    if (a.o === this.origin || !this.listeners.has(a.d)) return;
    try {
      const lines =
        a.f > 0
          ? await repositoryOf(this.deps, 'hosting').readLogLines(
              repositoryOf(this.deps, 'hosting').fork(),
              a.d,
              a.f - 1,
              MAX_LOG_LIMIT,
              a.t,
            )
          : [];
      this.publish({ deploymentId: a.d, lines, ...(a.s ? { status: a.s } : {}) });
    } catch (err) {
      this.deps.log.warn({ err, deployment: a.d }, 'could not read announced build log lines');
    }
  }
}

/** How a follower learns the deployment's state when it (re)reads from the table. */
export type DeploymentStatusReader = () => Promise<DeploymentStatus | null>;

/**
 * Streams a deployment's log to `sink` from the line after `after`: what is stored, then each line as it is
 * written, then `event: end` with the final status, and closes. Returns the function that releases the follower
 * (called by the transport when the stream ends for any reason).
 *
 * Order is kept by `seq`: a follower subscribes first, then reads what is stored; lines announced meanwhile are
 * written once (by `seq`), and a gap makes it read the table again. Every event is handled in turn.
 */
export function followLogs(
  deps: AppDeps,
  deploymentId: string,
  after: number,
  statusOf: DeploymentStatusReader,
  sink: EventSink,
): () => void {
  const { logHub: hub, repository } = runtimeOf(deps, 'hosting');
  let last = after;
  let done = false;
  const queue: Array<LogEvent | 'catch-up' | 'closing'> = ['catch-up'];
  let running = false;

  const finish = (status: DeploymentStatus) => {
    if (done) return;
    done = true;
    sink.send({ event: 'end', data: { status } });
    sink.close();
  };
  const write = (lines: readonly TLogLine[]) => {
    for (const line of lines) {
      if (line.seq <= last) continue;
      sink.send({ id: line.seq, event: 'log', data: line });
      last = line.seq;
    }
  };
  const catchUp = async () => {
    // The status first: lines written before a final status commit with it, so they are all readable below.
    const status = await statusOf();
    for (;;) {
      const lines = await repository.readLogLines(repository.fork(), deploymentId, last, MAX_LOG_LIMIT);
      if (done || sink.closed) return;
      write(lines);
      if (lines.length < MAX_LOG_LIMIT) break;
    }
    // A deployment that no longer exists went with its site.
    if (status === null) finish('canceled');
    else if (FINAL_DEPLOYMENT_STATUSES.includes(status)) finish(status);
  };
  const handle = async (item: LogEvent | 'catch-up' | 'closing') => {
    if (item === 'closing') {
      done = true;
      sink.close();
      return;
    }
    if (item === 'catch-up' || (item.lines[0] && item.lines[0].seq > last + 1)) {
      await catchUp();
      return;
    }
    write(item.lines);
    if (item.status) finish(item.status);
  };
  const pump = async () => {
    if (running) return;
    running = true;
    try {
      while (queue.length > 0 && !done && !sink.closed) await handle(queue.shift()!);
    } catch (err) {
      deps.log.warn({ err, deployment: deploymentId }, 'build log stream failed');
      done = true;
      sink.close();
    } finally {
      running = false;
    }
  };

  const unsubscribe = hub.subscribe(deploymentId, (e) => {
    queue.push(e);
    void pump();
  });
  void pump();
  return () => {
    done = true;
    queue.length = 0;
    unsubscribe();
  };
}
