// Test tier: unit
import { expect } from 'chai';
import { newId } from '../../../server/lib/ids.js';
import {
  DATABASE_SIZES,
  SIZE_SPECS,
  type DatabaseSize,
} from '../../../server/modules/databases/databases.constants.js';
import type { DatabaseInstance } from '../../../server/modules/databases/databases.driver.js';
import { humanBytes } from '../../../server/modules/databases/databases.dto.js';
import { SimulatedDatabaseDriver } from '../../../server/modules/databases/simulated-databases.driver.js';

const instance = (id: string, size: DatabaseSize = 'small'): DatabaseInstance => ({
  id,
  name: 'sim',
  engine: 'postgresql',
  version: '16',
  size,
  region: 'us-east',
  host: 'sim-abc.us-east.db.example.com',
  port: 5432,
  dbName: 'defaultdb',
  dbUser: 'dbadmin',
  server: null,
  multiAz: false,
});

describe('Databases: the simulated driver', () => {
  const driver = new SimulatedDatabaseDriver(200);
  const t0 = Date.parse('2026-11-21T08:00:00.000Z');

  it('gives the same metrics for the same database at the same instant, and different ones elsewhere', () => {
    const id = newId('db');
    const at = new Date(t0 + 12_345_678);
    expect(driver.metricsAt(instance(id), at)).to.deep.equal(
      new SimulatedDatabaseDriver(200).metricsAt(instance(id), at),
    );
    const others = new Set(
      Array.from({ length: 20 }, () => JSON.stringify(driver.metricsAt(instance(newId('db')), at))),
    );
    expect(others.size).to.be.at.least(15);
  });

  it('stays within 0–100 % and 0–max connections, for every size, over a month', () => {
    for (let n = 0; n < 10; n++) {
      const id = newId('db');
      for (const size of DATABASE_SIZES) {
        for (let t = t0; t < t0 + 30 * 86_400_000; t += 3_571_000) {
          const m = driver.metricsAt(instance(id, size), new Date(t));
          for (const v of [m.cpuUsage, m.memoryUsage, m.storageUsage]) {
            expect(Number.isInteger(v)).to.equal(true);
            expect(v).to.be.within(0, 100);
          }
          expect(m.activeConnections).to.be.within(0, SIZE_SPECS[size].maxConnections);
        }
      }
    }
  });

  it('moves smoothly: a few points at most from one minute to the next, yet it moves over hours', () => {
    for (let n = 0; n < 10; n++) {
      const db = instance(newId('db'));
      let previous = driver.metricsAt(db, new Date(t0));
      const seen = new Set<number>();
      for (let t = t0 + 60_000; t < t0 + 86_400_000; t += 60_000) {
        const m = driver.metricsAt(db, new Date(t));
        expect(Math.abs(m.cpuUsage - previous.cpuUsage)).to.be.at.most(4);
        expect(Math.abs(m.memoryUsage - previous.memoryUsage)).to.be.at.most(2);
        expect(Math.abs(m.storageUsage - previous.storageUsage)).to.be.at.most(1);
        seen.add(m.cpuUsage);
        previous = m;
      }
      expect(seen.size).to.be.at.least(10);
    }
  });

  it('names hosts <name>-<random>.<region>.db.example.com, within DNS limits', () => {
    const hostname = (spec: { name: string; region: 'eu-west' | 'ap-southeast' }) =>
      driver.placements({ ...spec, engine: 'postgresql' })[0]!.host;
    const a = hostname({ name: 'orders', region: 'eu-west' });
    const b = hostname({ name: 'orders', region: 'eu-west' });
    expect(a).to.match(/^orders-[a-z0-9]{8}\.eu-west\.db\.example\.com$/);
    expect(a).to.not.equal(b);
    const long = hostname({ name: `a${'-b'.repeat(31)}`, region: 'ap-southeast' });
    expect(long.split('.')[0]!.length).to.be.at.most(63);
    expect(long).to.match(/^a(-b)*-[a-z0-9]{8}\.ap-southeast\.db\.example\.com$/);
  });

  it('sizes a backup from the storage in use', async () => {
    const db = instance(newId('db'), 'medium');
    const at = new Date(t0);
    const bytes = await driver.runBackup(db, 'backup_x', at);
    const used = driver.metricsAt(db, at).storageUsage / 100;
    expect(bytes).to.equal(Math.round(100e9 * used * 0.6));
    expect(humanBytes(1_234_567_890)).to.equal('1.2 GB');
    expect(humanBytes(850_000_000)).to.equal('850 MB');
    expect(humanBytes(12_000)).to.equal('12 KB');
    expect(humanBytes(999)).to.equal('999 B');
    expect(humanBytes(1e12)).to.equal('1 TB');
  });
});
