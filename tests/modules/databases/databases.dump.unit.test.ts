import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import {
  DirectoryBackupStore,
  type BackupStore,
} from '../../../server/modules/databases/drivers/backup-store.js';
import { dumpInto } from '../../../server/modules/databases/drivers/engine-server.js';

/**
 * The dump path of the real drivers (drivers/engine-server.ts, drivers/backup-store.ts), with `sh` standing in for
 * pg_dump and mariadb-dump. A MariaDB backup of a small database was once stored empty (and "restored" into an
 * empty database): the store began reading the tool's output only after an `await`, and Node discards the output
 * of a child that exited unread.
 */
describe('Databases: dumps into the backup store (unit)', () => {
  let dir: string;
  let store: DirectoryBackupStore;
  const whole = ({ tail }: { tail: Buffer }) =>
    tail.toString('latin1').includes('-- Dump completed') ? null : 'not a whole dump';

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'dump-unit-'));
    store = new DirectoryBackupStore(dir);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps the whole output of a tool that exits before the store starts reading', async () => {
    // A store that reads only once the tool has exited: the slowest a real one can be.
    const late: BackupStore = {
      ...store,
      has: (id) => store.has(id),
      open: (id) => store.open(id),
      delete: (id) => store.delete(id),
      async put(id, dump, succeeded = Promise.resolve()) {
        await succeeded;
        return store.put(id, dump, succeeded);
      },
    };
    const size = await dumpInto(
      late,
      'backup_late',
      'sh',
      ['-c', "printf 'CREATE TABLE items;\\n-- Dump completed\\n'"],
      {
        env: {},
        secrets: [],
        checkOutput: whole,
      },
    );
    const { file, verified } = await store.open('backup_late');
    await verified;
    expect(readFileSync(file, 'utf8')).to.equal('CREATE TABLE items;\n-- Dump completed\n');
    expect(size).to.equal(38);
  });

  it('refuses a dump that is not whole (no end marker) and keeps nothing under its id', async () => {
    const err = await dumpInto(store, 'backup_cut', 'sh', ['-c', "printf 'CREATE TABLE items;\\n'"], {
      env: {},
      secrets: [],
      checkOutput: whole,
    }).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).to.match(/not a whole dump/);
    expect(await store.has('backup_cut')).to.equal(false);
  });

  it('refuses an empty dump, and an empty backup at restore', async () => {
    const err = await store.put('backup_empty', Readable.from([])).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).to.match(/empty/);
    expect(await store.has('backup_empty')).to.equal(false);
    // One stored empty before this check existed is not restored as an empty database.
    writeFileSync(join(dir, 'backup_old.dump'), '');
    writeFileSync(
      join(dir, 'backup_old.sha256'),
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  x\n',
    );
    const opened = await store.open('backup_old').then(
      () => null,
      (e: Error) => e,
    );
    expect(opened?.message).to.match(/empty/);
  });

  it('a tool that fails keeps nothing, and its error holds no secret', async () => {
    const err = await dumpInto(
      store,
      'backup_fail',
      'sh',
      ['-c', 'echo "cannot reach s3cretpw" >&2; exit 3'],
      {
        env: {},
        secrets: ['s3cretpw'],
        checkOutput: whole,
      },
    ).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message)
      .to.match(/exited with 3/)
      .and.not.contain('s3cretpw');
    expect(await store.has('backup_fail')).to.equal(false);
  });
});
