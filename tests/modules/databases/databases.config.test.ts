// Test tier: unit
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../../server/config.js';

describe('Databases: configuration (BACKUP_INTERVAL, DATABASE_DELETION_GRACE)', () => {
  it('defaults both to 24 hours', () => {
    expect(loadConfig({}).databases).to.deep.include({
      backupIntervalMs: 86_400_000,
      deletionGraceMs: 86_400_000,
    });
  });

  it('reads durations', () => {
    const c = loadConfig({ BACKUP_INTERVAL: '15m', DATABASE_DELETION_GRACE: '0' });
    expect(c.databases).to.deep.include({ backupIntervalMs: 900_000, deletionGraceMs: 0 });
    expect(loadConfig({ BACKUP_INTERVAL: '7d', DATABASE_DELETION_GRACE: '1.5h' }).databases).to.deep.include({
      backupIntervalMs: 7 * 86_400_000,
      deletionGraceMs: 5_400_000,
    });
  });

  it('refuses what is not a duration in range, one line per variable', () => {
    let err: unknown;
    try {
      loadConfig({ BACKUP_INTERVAL: 'daily', DATABASE_DELETION_GRACE: '91d' });
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(ConfigError);
    const problems = (err as ConfigError).problems;
    expect(problems).to.have.length(2);
    expect(problems[0]).to.match(/^BACKUP_INTERVAL must be a duration .*\(got "daily"\)$/);
    expect(problems[1]).to.match(/^DATABASE_DELETION_GRACE must be a duration .*\(got "91d"\)$/);
    expect(() => loadConfig({ BACKUP_INTERVAL: '10ms' })).to.throw(ConfigError, /BACKUP_INTERVAL/);
  });
});

describe('Databases: configuration of real servers (DATABASE_HOSTS)', () => {
  it('parses servers, drains and BACKUP_DIR, and never repeats an admin URL in an error', () => {
    const c = loadConfig({
      DATA_DIR: '/var/lib/platform',
      DATABASE_HOSTS:
        'postgresql@us-east=postgres://postgres@127.0.0.1:5432/postgres,mysql@eu-west=mysql://root@db2:3306/?drain',
    });
    expect(c.databases.backupDir).to.equal('/var/lib/platform/backups');
    expect(c.databases.hosts!.map((h) => [h.key, h.drain])).to.deep.equal([
      ['postgresql@us-east/127.0.0.1:5432', false],
      ['mysql@eu-west/db2:3306', true],
    ]);
    const err = (() => {
      try {
        loadConfig({ DATABASE_HOSTS: 'postgresql@us-east=mysql://root:hunter2secret@h/,mongodb@us-east=x' });
      } catch (e) {
        return e as Error;
      }
      throw new Error('accepted');
    })();
    expect(err.message).to.contain('DATABASE_HOSTS').and.contain('mongodb has no real driver');
    expect(err.message).to.not.contain('hunter2secret');
    expect(loadConfig({}).databases.hosts).to.equal(undefined);
  });
});
