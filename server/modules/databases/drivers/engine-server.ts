import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { createReadStream, existsSync, readdirSync, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import type { Transform } from 'node:stream';
import { PermanentDriverError, type DatabaseInstance, type InstanceMetrics } from '../databases.driver.js';
import type { BackupStore } from './backup-store.js';

/** What the hosted driver asks of one real server (PostgreSQL: postgres.server.ts; MariaDB/MySQL: mysql.server.ts). */
export interface EngineServer {
  /** Creates the database and its login (dropping a half-made one first); restores `restoreFile` into it. */
  create(instance: DatabaseInstance, spec: CreateSpec): Promise<void>;
  applySize(instance: DatabaseInstance, maxConnections: number): Promise<void>;
  /** Sets the login's password (as the server's verifier of it) and ends its sessions. */
  setVerifier(instance: DatabaseInstance, verifier: string): Promise<void>;
  /** Dumps the database into `store` as `backupId`; its size in bytes. */
  dump(instance: DatabaseInstance, store: BackupStore, backupId: string): Promise<number>;
  /** Ends its sessions, drops the database and its login (nothing when they are gone already). */
  destroy(instance: DatabaseInstance): Promise<void>;
  /** Sessions, busy sessions and bytes stored; null when the database does not exist. */
  load(instance: DatabaseInstance): Promise<{ sessions: number; busy: number; bytes: number } | null>;
  setReadOnly(instance: DatabaseInstance, readOnly: boolean): Promise<void>;
  /**
   * Closes the server's system databases to tenants where the engine needs it (PostgreSQL: once per process, before
   * any create); what still leaves something of the server open to them, to be logged.
   */
  prepare(): Promise<string[]>;
  /** The connections the server accepts from logins that are not superusers. */
  maxConnections(): Promise<number>;
  close(): Promise<void>;
}

export type { InstanceMetrics };

export interface CreateSpec {
  /** The login's password as the server stores it (scramVerifier, mysqlNativeHash). */
  verifier: string;
  /**
   * A dump (of this engine) to restore into the new database, its checksum already checked: it is run by the new
   * database's own login, never by the admin (docs/security.md, "Tenants of the database servers").
   */
  restore: { file: string } | null;
  maxConnections: number;
}

/** `cdb_<the id's random part>`: the name of a real database and of its login, derived from the id (idempotent). */
export function realName(id: string): string {
  const name = `cdb_${id.replace(/^db_/, '')}`;
  assertName(name);
  return name;
}

/** Every name put into SQL is checked (and quoted as an identifier as well). */
export function assertName(name: string): void {
  if (!/^cdb_[a-z0-9]{1,59}$/.test(name)) throw new Error('invalid managed database name');
}

/** PostgreSQL's SCRAM-SHA-256 verifier of `password` (what `pg_authid` stores): `CREATE ROLE … PASSWORD` takes it. */
export function scramVerifier(password: string, iterations = 4096): string {
  const salt = randomBytes(16);
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/** MariaDB's `mysql_native_password` hash of `password`: `IDENTIFIED BY PASSWORD` takes it. */
export function mysqlNativeHash(password: string): string {
  const once = createHash('sha1').update(password).digest();
  return `*${createHash('sha1').update(once).digest('hex').toUpperCase()}`;
}

/** `text` with every given secret replaced by `***` (tool output can echo a connection parameter). */
export function scrub(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 3) out = out.split(s).join('***');
  return out.replace(/:\/\/[^@\s/]*@/g, '://***@');
}

/** The first and last bytes a tool wrote, and how many: enough to tell a whole dump from a cut or empty one. */
export interface OutputEnds {
  head: Buffer;
  tail: Buffer;
  bytes: number;
}

const ENDS_KEPT = 256;

/**
 * The bounds of every tool run (docs/databases.md, "Limits of the tools"): `timeoutMs` the wall clock of one run
 * (`DATABASE_TOOL_TIMEOUT`), `lockWaitMs` how long a dump waits for a lock a tenant holds
 * (`DATABASE_DUMP_LOCK_TIMEOUT`). The jobs run the drivers inside {@link withToolLimits}, with the configured ones.
 */
export interface ToolLimits {
  timeoutMs: number;
  lockWaitMs: number;
}

export const DEFAULT_TOOL_LIMITS: ToolLimits = { timeoutMs: 30 * 60_000, lockWaitMs: 60_000 };

const limitsInScope = new AsyncLocalStorage<ToolLimits>();

/** Runs `fn` with `limits` applying to every tool it starts. */
export function withToolLimits<T>(limits: ToolLimits, fn: () => Promise<T>): Promise<T> {
  return limitsInScope.run(limits, fn);
}

/** The limits of the tools started now. */
export function toolLimits(): ToolLimits {
  return limitsInScope.getStore() ?? DEFAULT_TOOL_LIMITS;
}

/** A duration for a reason a tenant reads: `90s`, `30m`. */
const shown = (ms: number) =>
  ms % 60_000 === 0 ? `${ms / 60_000}m` : ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;

/**
 * The arguments of a dump tool that bound its waits on the tenant's locks: pg_dump's `--lock-wait-timeout`; for
 * mariadb-dump, which has no option for its metadata-lock waits, `max_statement_time` a little over the wall clock,
 * so that the server too stops a statement still waiting once the tool has been killed at that bound.
 */
export function dumpBoundArgs(engine: 'postgresql' | 'mysql'): string[] {
  const { timeoutMs, lockWaitMs } = toolLimits();
  return engine === 'postgresql'
    ? [`--lock-wait-timeout=${Math.max(1, Math.round(lockWaitMs))}`]
    : [`--max-statement-time=${Math.ceil(timeoutMs / 1000) + 5}`];
}

/**
 * Every tool is tied to this process's life: started through util-linux's `setpriv --pdeathsig KILL`, it is killed
 * by the kernel the moment the API dies (even by SIGKILL), rather than running on under init with a copy of a
 * tenant's data. Where `setpriv` is missing, {@link reapOrphanedTools} at the next start is what remains.
 */
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));
/** The variable that marks a tool's process as the API's, with the pid of the process that started it. */
const TOOL_MARK = 'CLOUD_PLATFORM_TOOL_OF';

function ownerAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Kills the tools (pg_dump, pg_restore, mariadb-dump, mariadb) left running by an API process that died: those
 * whose mark names a process that is gone, or that were handed to init. Linux (`/proc`); returns how many.
 */
export function reapOrphanedTools(): number {
  if (!existsSync('/proc/self/environ')) return 0;
  let killed = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const env = readFileSync(`/proc/${pid}/environ`, 'latin1');
      const mark = env.split('\0').find((v) => v.startsWith(`${TOOL_MARK}=`));
      if (!mark) continue;
      const owner = Number(mark.slice(TOOL_MARK.length + 1));
      // `stat`: "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      // Orphaned: the API that started it is gone, or its pid now names another process (the tool went to init).
      // A process a tool started itself has the tool as its parent and stays with it.
      if (ownerAlive(owner) && ppid !== 1) continue;
      process.kill(pid, 'SIGKILL');
      killed++;
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return killed;
}

/**
 * Runs a client tool (pg_dump, pg_restore, mariadb-dump, mariadb) with its secrets in `env` or an options file,
 * never on the command line: stdout goes straight into `stdoutFile` (when given; created, mode 0600), stdin comes
 * from `stdinFile`. Throws with the tool's last error lines (scrubbed of `secrets`) when it exits non-zero, or when
 * `checkOutput` finds the file it wrote not whole.
 *
 * The tool writes its output file itself (the file is its stdout): no byte of a dump passes through this process,
 * whose event loop also serves the API, and a dump tool's output cannot be lost to a reader that came late.
 */
export async function runTool(
  command: string,
  args: string[],
  opts: {
    env: Record<string, string>;
    secrets: readonly (string | undefined)[];
    stdinFile?: string;
    /** What `stdinFile` passes through on its way to the tool (a rewrite of the dump's own clauses). */
    stdinTransform?: Transform;
    stdoutFile?: string;
    /** The reason the output is not whole (an empty or cut dump), or null. */
    checkOutput?: (ends: OutputEnds) => string | null;
    /** The wall-clock bound; default the `DATABASE_TOOL_TIMEOUT` in scope ({@link toolLimits}). */
    timeoutMs?: number;
  },
): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? toolLimits().timeoutMs;
  const out = opts.stdoutFile ? await open(opts.stdoutFile, 'wx', 0o600) : null;
  let child: ChildProcess;
  let stderr = '';
  let exited: Promise<{ code: number | null; error?: Error }>;
  try {
    const [file, argv] = SETPRIV
      ? [SETPRIV, ['--pdeathsig', 'KILL', '--', command, ...args]]
      : [command, args];
    child = spawn(file, argv, {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        LANG: 'C.UTF-8',
        ...opts.env,
        [TOOL_MARK]: String(process.pid),
      },
      stdio: [opts.stdinFile ? 'pipe' : 'ignore', out ? out.fd : 'ignore', 'pipe'],
      // A process group of its own: a stop at the bound kills whatever the tool started too.
      detached: true,
    });
    // Listened to before anything is awaited: a quick tool can have exited (and its `close` gone by) meanwhile.
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-4000);
    });
    exited = new Promise((resolve) => {
      child.on('error', (error) => resolve({ code: null, error }));
      child.on('close', (code) => resolve({ code }));
    });
  } finally {
    // The child holds its own copy of the descriptor from here on.
    await out?.close();
  }
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  }, timeoutMs);
  try {
    if (opts.stdinFile) {
      const input = createReadStream(opts.stdinFile);
      input.on('error', () => child.kill('SIGKILL'));
      if (opts.stdinTransform) {
        opts.stdinTransform.on('error', () => child.kill('SIGKILL'));
        input.pipe(opts.stdinTransform).pipe(child.stdin!);
      } else input.pipe(child.stdin!);
      child.stdin!.on('error', () => {});
    }
    const { code, error } = await exited;
    // Not retried: a second run would meet the same bound.
    if (timedOut)
      throw new PermanentDriverError(
        `${command} was stopped at the limit of a tool run (DATABASE_TOOL_TIMEOUT, ${shown(timeoutMs)})`,
      );
    if (error)
      throw new Error(`${command} could not start (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    // setpriv says so when it cannot run the tool.
    if (SETPRIV && code === 127 && /setpriv: failed to execute/.test(stderr))
      throw new Error(`${command} could not start (ENOENT)`);
    if (code !== 0) {
      const tail = scrub(stderr.trim().split('\n').slice(-3).join(' | '), opts.secrets).slice(0, 400);
      throw new Error(`${command} exited with ${code}${tail ? `: ${tail}` : ''}`);
    }
    if (opts.stdoutFile && opts.checkOutput) {
      const reason = opts.checkOutput(await outputEnds(opts.stdoutFile));
      if (reason) throw new Error(`${command}: ${reason}`);
    }
  } finally {
    clearTimeout(timer);
  }
}

/** The first and last `ENDS_KEPT` bytes of `file`, and its size. */
async function outputEnds(file: string): Promise<OutputEnds> {
  const fh = await open(file, 'r');
  try {
    const bytes = (await fh.stat()).size;
    const read = async (position: number, length: number) => {
      const buf = Buffer.alloc(Math.max(0, length));
      const { bytesRead } = await fh.read(buf, 0, buf.length, position);
      return buf.subarray(0, bytesRead);
    };
    const head = await read(0, Math.min(ENDS_KEPT, bytes));
    const tail = await read(Math.max(0, bytes - ENDS_KEPT), Math.min(ENDS_KEPT, bytes));
    return { head, tail, bytes };
  } finally {
    await fh.close();
  }
}

/**
 * Runs a dump tool into `store` as `backupId` (PostgreSQL's pg_dump, MariaDB's mariadb-dump), writing the store's
 * file itself: kept only when the tool exited with 0 and `checkOutput` finds the dump whole; its size in bytes.
 * Errors are scrubbed of `secrets`.
 */
export async function dumpInto(
  store: BackupStore,
  backupId: string,
  command: string,
  args: string[],
  opts: {
    env: Record<string, string>;
    secrets: readonly (string | undefined)[];
    checkOutput: (ends: OutputEnds) => string | null;
  },
): Promise<number> {
  try {
    const { sizeBytes } = await store.put(backupId, (file) =>
      runTool(command, args, { ...opts, stdoutFile: file }),
    );
    return sizeBytes;
  } catch (err) {
    throw safeError(err, opts.secrets);
  }
}

/** An error for the API's own records: its message scrubbed of `secrets`, at most 400 characters. */
export function safeError(err: unknown, secrets: readonly (string | undefined)[]): Error {
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown })?.code;
  const text = scrub(message, secrets).slice(0, 400) || (typeof code === 'string' ? code : 'error');
  return err instanceof PermanentDriverError ? new PermanentDriverError(text) : new Error(text);
}
