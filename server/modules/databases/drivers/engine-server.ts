import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
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
    stdoutFile?: string;
    /** The reason the output is not whole (an empty or cut dump), or null. */
    checkOutput?: (ends: OutputEnds) => string | null;
    timeoutMs?: number;
  },
): Promise<void> {
  const out = opts.stdoutFile ? await open(opts.stdoutFile, 'wx', 0o600) : null;
  let child: ChildProcess;
  let stderr = '';
  let exited: Promise<{ code: number | null; error?: Error }>;
  try {
    child = spawn(command, args, {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', ...opts.env },
      stdio: [opts.stdinFile ? 'pipe' : 'ignore', out ? out.fd : 'ignore', 'pipe'],
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
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 3_600_000);
  try {
    if (opts.stdinFile) {
      const input = createReadStream(opts.stdinFile);
      input.on('error', () => child.kill('SIGKILL'));
      input.pipe(child.stdin!);
      child.stdin!.on('error', () => {});
    }
    const { code, error } = await exited;
    if (error)
      throw new Error(`${command} could not start (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
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
