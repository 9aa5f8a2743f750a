import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../../server/config.js';

describe('Databases: configuration (BACKUP_INTERVAL, DATABASE_DELETION_GRACE)', () => {
  it('defaults both to 24 hours', () => {
    expect(loadConfig({}).databases).to.deep.equal({
      backupIntervalMs: 86_400_000,
      deletionGraceMs: 86_400_000,
    });
  });

  it('reads durations', () => {
    const c = loadConfig({ BACKUP_INTERVAL: '15m', DATABASE_DELETION_GRACE: '0' });
    expect(c.databases).to.deep.equal({ backupIntervalMs: 900_000, deletionGraceMs: 0 });
    expect(loadConfig({ BACKUP_INTERVAL: '7d', DATABASE_DELETION_GRACE: '1.5h' }).databases).to.deep.equal({
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
