// Test tier: unit
import { spawn } from 'node:child_process';
import { pbkdf2 } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { DirectoryBackupStore } from '../../../server/modules/databases/drivers/backup-store.js';
import {
  dumpInto,
  reapOrphanedTools,
  withToolLimits,
} from '../../../server/modules/databases/drivers/engine-server.js';
import { PermanentDriverError } from '../../../server/modules/databases/databases.driver.js';

/**
 * The dump path of the real drivers (drivers/engine-server.ts, drivers/backup-store.ts), with `sh` standing in for
 * pg_dump and mariadb-dump. A MariaDB backup of a small database was once stored empty (and "restored" into an
 * empty database): the store began reading the tool's output only after an `await`, and Node discards the output
 * of a child that exited unread. The tools now write the store's file themselves.
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

  it('keeps the whole output of a tool that exits at once, written by the tool into the store', async () => {
    const size = await dumpInto(
      store,
      'backup_quick',
      'sh',
      ['-c', "printf 'CREATE TABLE items;\\n-- Dump completed\\n'"],
      {
        env: {},
        secrets: [],
        checkOutput: whole,
      },
    );
    const { file, verified } = await store.open('backup_quick');
    await verified;
    expect(readFileSync(file, 'utf8')).to.equal('CREATE TABLE items;\n-- Dump completed\n');
    expect(size).to.equal(38);
    expect(statSync(file).mode & 0o777).to.equal(0o600);
    expect(readdirSync(dir).sort()).to.deep.equal(['backup_quick.dump', 'backup_quick.sha256']);
  });

  it('keeps the output of a tool that exits while its file is still being closed (a busy thread pool)', async () => {
    // Every thread of libuv's pool busy for a while: closing the file the tool writes waits for one, and the tool
    // has exited (its `close` event gone by) before the wait is over. The exit must not be missed.
    const busy = Array.from(
      { length: 8 },
      () =>
        new Promise<void>((resolve, reject) =>
          pbkdf2('x', 'salt', 2_000_000, 32, 'sha256', (err) => (err ? reject(err) : resolve())),
        ),
    );
    const size = await dumpInto(
      store,
      'backup_busy',
      'sh',
      ['-c', "printf 'CREATE TABLE items;\\n-- Dump completed\\n'"],
      { env: {}, secrets: [], checkOutput: whole },
    );
    await Promise.all(busy);
    expect(size).to.equal(38);
    expect(await store.has('backup_busy')).to.equal(true);
  });

  it('a dump that fails leaves a backup already stored under the same id as it was', async () => {
    await store.put('backup_kept', (file) => writeFile(file, 'first dump'));
    const err = await store
      .put('backup_kept', async (file) => {
        await writeFile(file, 'half of a second');
        throw new Error('the tool died');
      })
      .then(
        () => null,
        (e: Error) => e,
      );
    expect(err?.message).to.equal('the tool died');
    const { file, verified } = await store.open('backup_kept');
    await verified;
    expect(readFileSync(file, 'utf8')).to.equal('first dump');
    expect(readdirSync(dir).sort()).to.deep.equal(['backup_kept.dump', 'backup_kept.sha256']);
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
    const err = await store
      .put('backup_empty', (file) => writeFile(file, ''))
      .then(
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

  it('a tool run past DATABASE_TOOL_TIMEOUT is killed, keeps nothing, and says which limit stopped it', async () => {
    const started = Date.now();
    const err = await withToolLimits({ timeoutMs: 300, lockWaitMs: 1000 }, () =>
      dumpInto(store, 'backup_slow', 'sh', ['-c', 'sleep 30'], { env: {}, secrets: [], checkOutput: whole }),
    ).then(
      () => null,
      (e: Error) => e,
    );
    expect(Date.now() - started).to.be.below(5000);
    expect(err).to.be.instanceOf(PermanentDriverError);
    expect(err?.message).to.match(/DATABASE_TOOL_TIMEOUT, 300ms/);
    expect(readdirSync(dir)).to.deep.equal([]);
  });

  it("deleting a backup removes the dump of it being written; a start removes a dead process's .partial", async () => {
    const mine = 'backup_half.4194999.00000000.abcdef.partial';
    writeFileSync(join(dir, mine), 'half a dump');
    await store.delete('backup_half');
    expect(readdirSync(dir)).to.deep.equal([]);

    // The name of a dump written by this host's process 1 (alive: kept unless old) and by a process that is gone.
    const real = await new Promise<string>((resolve, reject) => {
      void store
        .put('backup_live', async (file) => {
          writeFileSync(file, 'half');
          resolve(file);
          await new Promise((r) => setTimeout(r, 300));
          writeFileSync(file, 'whole');
        })
        .catch(reject);
    });
    const [, , host] = real.split('/').pop()!.split('.');
    const dead = `backup_dead.4194999.${host}.abcdef.partial`;
    writeFileSync(join(dir, dead), 'half a dump');
    expect(await store.sweepPartials(3_600_000)).to.equal(1);
    const left = readdirSync(dir);
    expect(left).to.not.include(dead);
    // The one this process is writing stays.
    expect(left.filter((f) => f.startsWith('backup_live'))).to.have.length(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(readdirSync(dir).sort()).to.deep.equal(['backup_live.dump', 'backup_live.sha256']);
  });

  it('the start kills a tool whose API is gone, and leaves those of a live one', async () => {
    const spawnMarked = (owner: number) =>
      spawn('sleep', ['30'], { env: { PATH: process.env.PATH, CLOUD_PLATFORM_TOOL_OF: String(owner) } });
    const orphan = spawnMarked(4194999);
    const kept = spawnMarked(process.pid);
    const ended = new Promise((r) => orphan.once('exit', (_code, signal) => r(signal)));
    try {
      await new Promise((r) => setTimeout(r, 100));
      expect(reapOrphanedTools()).to.be.at.least(1);
      expect(await ended).to.equal('SIGKILL');
      expect(kept.exitCode).to.equal(null);
      expect(kept.signalCode).to.equal(null);
    } finally {
      orphan.kill('SIGKILL');
      kept.kill('SIGKILL');
    }
  });
});
