import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { PassThrough, type Readable } from 'node:stream';
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
  close(): Promise<void>;
}

export type { InstanceMetrics };

export interface CreateSpec {
  /** The login's password as the server stores it (scramVerifier, mysqlNativeHash). */
  verifier: string;
  /**
   * A dump (of this engine) to restore into the new database, and its checksum being checked meanwhile: the
   * database opens to logins only once `verified` resolves (else it is destroyed like any failed creation).
   */
  restore: { file: string; verified: Promise<void> } | null;
  maxConnections: number;
}

/** The checksum failure of a restore's dump, once its check is over; null when it matched or there is none. */
export async function restoreMismatch(restore: CreateSpec['restore']): Promise<unknown> {
  return restore
    ? restore.verified.then(
        () => null,
        (err: unknown) => err,
      )
    : null;
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
 * Runs a client tool (pg_dump, pg_restore, mariadb-dump, mariadb) with its secrets in `env` or an options file,
 * never on the command line: stdout streams to `onStdout` (when given), stdin from `stdinFile`. Throws with the
 * tool's last error lines (scrubbed of `secrets`) when it exits non-zero, or when `checkOutput` finds its output
 * not whole.
 *
 * The tool's stdout is taken over the moment it starts (piped into a stream of our own): a child process whose
 * stdout nobody reads when it exits has that output discarded by Node, so a reader that attaches after an `await`
 * would get nothing from a tool that was quick to finish (a small database's dump) and store an empty dump.
 */
export async function runTool(
  command: string,
  args: string[],
  opts: {
    env: Record<string, string>;
    secrets: readonly (string | undefined)[];
    stdinFile?: string;
    /** Reads stdout; `succeeded` settles when the tool has exited (rejected unless with 0 and a whole output). */
    onStdout?: (stdout: Readable, succeeded: Promise<void>) => Promise<unknown>;
    /** The reason the output is not whole (an empty or cut dump), or null. */
    checkOutput?: (ends: OutputEnds) => string | null;
    timeoutMs?: number;
  },
): Promise<void> {
  const child = spawn(command, args, {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', ...opts.env },
    stdio: [opts.stdinFile ? 'pipe' : 'ignore', opts.onStdout ? 'pipe' : 'ignore', 'pipe'],
  });
  const ends: OutputEnds = { head: Buffer.alloc(0), tail: Buffer.alloc(0), bytes: 0 };
  let stdout: PassThrough | undefined;
  if (opts.onStdout) {
    stdout = new PassThrough();
    child.stdout!.on('data', (chunk: Buffer) => {
      ends.bytes += chunk.length;
      if (ends.head.length < ENDS_KEPT) ends.head = Buffer.concat([ends.head, chunk]).subarray(0, ENDS_KEPT);
      ends.tail = Buffer.concat([ends.tail, chunk]).subarray(-ENDS_KEPT);
    });
    child.stdout!.pipe(stdout);
  }
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4000);
  });
  const exited = new Promise<{ code: number | null; error?: Error }>((resolve) => {
    child.on('error', (error) => resolve({ code: null, error }));
    child.on('close', (code) => resolve({ code }));
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 3_600_000);
  try {
    if (opts.stdinFile) {
      const input = createReadStream(opts.stdinFile);
      input.on('error', () => child.kill('SIGKILL'));
      input.pipe(child.stdin!);
      child.stdin!.on('error', () => {});
    }
    const incomplete = () => (opts.checkOutput ? opts.checkOutput(ends) : null);
    const succeeded = exited.then(({ code }) => {
      if (code !== 0) throw new Error(`${command} did not succeed`);
      const reason = incomplete();
      if (reason) throw new Error(`${command}: ${reason}`);
    });
    succeeded.catch(() => {});
    const reading = stdout && opts.onStdout ? opts.onStdout(stdout, succeeded) : Promise.resolve();
    let readError: unknown;
    const [{ code, error }] = await Promise.all([exited, reading.catch((err: unknown) => (readError = err))]);
    if (error)
      throw new Error(`${command} could not start (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    if (code !== 0) {
      const tail = scrub(stderr.trim().split('\n').slice(-3).join(' | '), opts.secrets).slice(0, 400);
      throw new Error(`${command} exited with ${code}${tail ? `: ${tail}` : ''}`);
    }
    const reason = incomplete();
    if (reason) throw new Error(`${command}: ${reason}`);
    if (readError) throw readError instanceof Error ? readError : new Error('the dump could not be stored');
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs a dump tool into `store` as `backupId` (PostgreSQL's pg_dump, MariaDB's mariadb-dump): kept only when the
 * tool exited with 0 and `checkOutput` finds the dump whole; its size in bytes. Errors are scrubbed of `secrets`.
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
  let size = 0;
  try {
    await runTool(command, args, {
      ...opts,
      onStdout: async (out, succeeded) => {
        size = (await store.put(backupId, out, succeeded)).sizeBytes;
      },
    });
  } catch (err) {
    throw safeError(err, opts.secrets);
  }
  return size;
}

/** An error for the API's own records: its message scrubbed of `secrets`, at most 400 characters. */
export function safeError(err: unknown, secrets: readonly (string | undefined)[]): Error {
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown })?.code;
  const text = scrub(message, secrets).slice(0, 400) || (typeof code === 'string' ? code : 'error');
  return err instanceof PermanentDriverError ? new PermanentDriverError(text) : new Error(text);
}
