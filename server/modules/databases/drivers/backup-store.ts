import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
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
  delete(id: string): Promise<void>;
}

const SAFE_ID = /^[a-z0-9_]{1,64}$/;
/** Dumps are hashed in reads of 1 MiB: half the time of the default 64 KiB ones on a dump of a few MB. */
const READ_CHUNK = 1 << 20;

/**
 * A directory (`BACKUP_DIR`): `<id>.dump` and `<id>.sha256` side by side, mode 0600. A dump is written to a
 * `.partial` file and renamed once whole, so a crash never leaves a truncated dump under a backup's name.
 */
export class DirectoryBackupStore implements BackupStore {
  readonly dir: string;

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
    const partial = join(this.dir, `${id}.${randomBytes(6).toString('hex')}.partial`);
    let sizeBytes: number;
    let sha256: string;
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
      throw err;
    }
    await writeFile(this.path(id, 'sha256'), `${sha256}  ${id}.dump\n`, { mode: 0o600 });
    await rename(partial, this.path(id, 'dump'));
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
  }
}
