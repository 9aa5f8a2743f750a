import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { PermanentDriverError } from '../databases.driver.js';

/**
 * Where the dumps of real databases are kept (docs/databases.md, "Databases", Backups; docs/deploying.md). An
 * interface, so that an object store can take the place of the directory: a dump is written into a file of the
 * store's under the backup's id, with its SHA-256, and read back (checked against it) to restore.
 */
export interface BackupStore {
  /**
   * Stores backup `id` as what `write` puts into the local file it is given (a dump tool writes it directly;
   * `write` rejecting keeps nothing, and a backup of that id already stored stays); its size in bytes and SHA-256
   * (hex). Refuses an empty one. An object store would upload the file once written.
   */
  put(id: string, write: (file: string) => Promise<void>): Promise<{ sizeBytes: number; sha256: string }>;
  /**
   * A local file holding backup `id` (throws when missing or empty), and its check against the stored checksum,
   * already under way: `verified` rejects when the content does not match it.
   */
  open(id: string): Promise<{ file: string; verified: Promise<void> }>;
  has(id: string): Promise<boolean>;
  /** Removes backup `id`, and any dump of it still being written. */
  delete(id: string): Promise<void>;
  /**
   * Removes the dumps left half-written by a process that died (their tool was killed with it): at start, and by
   * the sweep. `olderThanMs`: any half-written dump not touched for that long is left over, whoever wrote it.
   */
  sweepPartials(olderThanMs: number): Promise<number>;
}

const SAFE_ID = /^[a-z0-9_]{1,64}$/;
/** Dumps are hashed in reads of 1 MiB: half the time of the default 64 KiB ones on a dump of a few MB. */
const READ_CHUNK = 1 << 20;

/** This host, in the names of the dumps it is writing (a `BACKUP_DIR` may be shared by several hosts). */
const HOST_TAG = createHash('sha256').update(hostname()).digest('hex').slice(0, 8);
const PARTIAL = /^([a-z0-9_]{1,64})\.(\d+)\.([0-9a-f]{8})\.[0-9a-f]+\.partial$/;

/** Whether process `pid` of this host is alive. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A directory (`BACKUP_DIR`): `<id>.dump` and `<id>.sha256` side by side, mode 0600. A dump is written to a
 * `<id>.<pid>.<host>.<random>.partial` file and renamed once whole, so a crash never leaves a truncated dump under a
 * backup's name, and the half-written file of a process that died is known as such
 * (docs/databases.md, "Limits of the tools").
 */
export class DirectoryBackupStore implements BackupStore {
  readonly dir: string;
  /** The `.partial` files this process is writing. */
  private readonly writing = new Set<string>();

  constructor(dir: string) {
    this.dir = resolve(dir);
  }

  private path(id: string, ext: string): string {
    if (!SAFE_ID.test(id)) throw new Error('invalid backup id');
    return join(this.dir, `${id}.${ext}`);
  }

  /** The file is written as a `.partial` of its own and renamed only once whole and hashed. */
  async put(
    id: string,
    write: (file: string) => Promise<void>,
  ): Promise<{ sizeBytes: number; sha256: string }> {
    if (!SAFE_ID.test(id)) throw new Error('invalid backup id');
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const partial = join(
      this.dir,
      `${id}.${process.pid}.${HOST_TAG}.${randomBytes(6).toString('hex')}.partial`,
    );
    let sizeBytes: number;
    let sha256: string;
    this.writing.add(partial);
    try {
      await write(partial);
      sizeBytes = (await stat(partial)).size;
      // No dump tool writes nothing: an empty dump is one that was lost, never a backup.
      if (sizeBytes === 0) throw new Error('the dump is empty');
      const hash = createHash('sha256');
      await pipeline(createReadStream(partial, { highWaterMark: READ_CHUNK }), hash);
      sha256 = hash.digest('hex');
    } catch (err) {
      await rm(partial, { force: true });
      this.writing.delete(partial);
      throw err;
    }
    try {
      await writeFile(this.path(id, 'sha256'), `${sha256}  ${id}.dump\n`, { mode: 0o600 });
      await rename(partial, this.path(id, 'dump'));
    } finally {
      this.writing.delete(partial);
    }
    return { sizeBytes, sha256 };
  }

  async open(id: string): Promise<{ file: string; verified: Promise<void> }> {
    const file = this.path(id, 'dump');
    if ((await stat(file)).size === 0) throw new Error(`backup ${id} is empty`);
    const expected = (await readFile(this.path(id, 'sha256'), 'utf8')).split(/\s/)[0];
    const verified = (async () => {
      const hash = createHash('sha256');
      await pipeline(createReadStream(file, { highWaterMark: READ_CHUNK }), hash);
      if (hash.digest('hex') !== expected)
        throw new PermanentDriverError(`backup ${id} does not match its checksum`);
    })();
    verified.catch(() => {}); // awaited by the restore; never an unhandled rejection meanwhile
    return { file, verified };
  }

  async has(id: string): Promise<boolean> {
    return stat(this.path(id, 'dump')).then(
      () => true,
      () => false,
    );
  }

  async delete(id: string): Promise<void> {
    await rm(this.path(id, 'dump'), { force: true });
    await rm(this.path(id, 'sha256'), { force: true });
    for (const name of await this.partials())
      if (PARTIAL.exec(name)?.[1] === id) await rm(join(this.dir, name), { force: true });
  }

  /**
   * A `.partial` of this host is left over when the process that named it is gone, or is this one and no longer
   * writes it (a pid reused after a restart); one of another host once untouched for `olderThanMs` (longer than a
   * tool may run).
   */
  async sweepPartials(olderThanMs: number): Promise<number> {
    let removed = 0;
    const now = Date.now();
    for (const name of await this.partials()) {
      const m = PARTIAL.exec(name);
      const file = join(this.dir, name);
      let stale: boolean;
      if (this.writing.has(file)) continue;
      if (m && m[3] === HOST_TAG && (Number(m[2]) === process.pid || !alive(Number(m[2])))) stale = true;
      else
        stale = await stat(file).then(
          (st) => now - st.mtimeMs > olderThanMs,
          () => false,
        );
      if (!stale) continue;
      await rm(file, { force: true });
      removed++;
    }
    return removed;
  }

  private async partials(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    return names.filter((n) => n.endsWith('.partial'));
  }
}
