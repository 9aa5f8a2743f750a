import { expect } from 'chai';
import { ownedBy } from '../../../server/access/scope.js';
import type { AppDeps } from '../../../server/kit/deps.js';
import { newId } from '../../../server/lib/ids.js';
import type {
  DatabaseEngine,
  DatabaseStatus,
} from '../../../server/modules/databases/databases.constants.js';
import type {
  DatabasesRepository,
  NewDatabase,
} from '../../../server/modules/databases/databases.repository.js';
import type { ContractWorld } from '../../support/repository-contract.js';
import { actorOf } from '../../support/unit.js';

/** What the databases contract runs against: a repository, the rows it refers to, the deps its counting query takes. */
export interface DatabasesContractSubject {
  repo: DatabasesRepository;
  world: ContractWorld;
  deps: AppDeps;
}

const T0 = Date.parse('2026-11-01T00:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000);

/**
 * The behaviour of a {@link DatabasesRepository} the databases services rely on (docs/databases.md, "In the code"),
 * run against the MikroORM repository on the test database and the in-memory one of the unit tests
 * (tests/modules/databases/databases.repository-contract.test.ts).
 */
export function describeDatabasesRepositoryContract(
  label: string,
  make: () => Promise<DatabasesContractSubject>,
): void {
  describe(`DatabasesRepository contract: ${label}`, () => {
    let s: DatabasesContractSubject;
    beforeEach(async () => {
      s = await make();
    });

    /** A new database row, created at `seconds`, in its own transaction. */
    async function database(
      organizationId: string,
      userId: string,
      seconds: number,
      opts: { name?: string; engine?: DatabaseEngine; status?: DatabaseStatus } = {},
    ): Promise<string> {
      const id = newId('db');
      const fields: NewDatabase = {
        id,
        createdAt: at(seconds),
        updatedAt: at(seconds),
        organizationId,
        userId,
        name: opts.name ?? `db-${seconds}`,
        engine: opts.engine ?? 'postgresql',
        version: '16',
        size: 'small',
        region: 'us-east',
        status: opts.status ?? 'creating',
        backupEnabled: false,
        multiAz: false,
        backupRetention: 7,
        host: `${id}.us-east.db.example.com`,
        port: null,
        server: null,
        sslRequired: true,
        readOnly: false,
        statusReason: null,
        dbName: 'defaultdb',
        dbUser: 'dbadmin',
        passwordHash: 'f'.repeat(64),
        generation: 1,
        backupSchedule: 0,
        nextBackupAt: null,
        lastBackupAt: null,
        deletionScheduledAt: null,
        removedAt: null,
        restoredFromBackupId: null,
      };
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        s.repo.createDatabase(tx, fields);
      });
      return id;
    }

    it('finds a database for its owner and the admins, never for another member nor another organization', async () => {
      const a = await s.world.organization();
      const member = await s.world.user(a.organizationId, 'member');
      const other = await s.world.user(a.organizationId, 'member');
      const b = await s.world.organization();
      const id = await database(a.organizationId, member, 1, { name: 'orders' });
      const em = s.repo.fork();

      const own = await s.repo.findDatabase(em, ownedBy(actorOf(a.organizationId, member, 'member')), id);
      expect(own).to.include({ id, name: 'orders', status: 'creating', generation: 1, removedAt: null });
      expect(own!.user.id).to.equal(member);
      expect(own!.organization.id).to.equal(a.organizationId);
      const admin = await s.world.user(a.organizationId, 'admin');
      expect(
        await s.repo.findDatabase(em, ownedBy(actorOf(a.organizationId, admin, 'admin')), id),
      ).to.include({
        id,
      });
      expect(await s.repo.findDatabase(em, ownedBy(actorOf(a.organizationId, other, 'member')), id)).to.equal(
        null,
      );
      expect(
        await s.repo.findDatabase(em, ownedBy(actorOf(b.organizationId, b.userId, 'owner')), id),
      ).to.equal(null);
      expect((await s.repo.findLiveDatabase(s.repo.fork(), id))!.id).to.equal(id);
    });

    it('lists databases newest first with the filters and the total, by page', async () => {
      const a = await s.world.organization();
      const other = await s.world.user(a.organizationId);
      const b = await s.world.organization();
      const d1 = await database(a.organizationId, a.userId, 1);
      const d2 = await database(a.organizationId, a.userId, 2, { engine: 'mysql' });
      const d3 = await database(a.organizationId, other, 3);
      await database(b.organizationId, b.userId, 4);
      const list = (filter: Record<string, unknown>, page = { page: 1, limit: 10 }) =>
        s.repo.databasePage(s.repo.fork(), { organization: a.organizationId, ...filter }, page);
      const ids = (p: { items: { id: string }[] }) => p.items.map((x) => x.id);

      const all = await list({});
      expect(ids(all)).to.deep.equal([d3, d2, d1]);
      expect(all).to.include({ total: 3, hasMore: false });
      expect(all.items[0]).to.deep.include({ name: 'db-3', engine: 'postgresql', user: { id: other } });
      expect(all.items[0]!.createdAt.getTime()).to.equal(at(3).getTime());
      expect(ids(await list({ user: a.userId }))).to.deep.equal([d2, d1]);
      expect(ids(await list({ engine: 'mysql' }))).to.deep.equal([d2]);
      expect(ids(await list({ status: 'running' }))).to.deep.equal([]);
      const second = await list({}, { page: 2, limit: 2 });
      expect(ids(second)).to.deep.equal([d1]);
      expect(second).to.include({ total: 3, hasMore: false });
      expect(await list({}, { page: 1, limit: 2 })).to.include({ hasMore: true });
    });

    it('locks a database in a transaction (removed ones only when asked), and counts them for the plan', async () => {
      const a = await s.world.organization();
      const member = await s.world.user(a.organizationId, 'member');
      const live = await database(a.organizationId, a.userId, 1, { name: 'live' });
      const gone = await database(a.organizationId, member, 2, { name: 'gone' });
      await database(a.organizationId, a.userId, 3, { name: 'leaving', status: 'deleting' });

      await s.repo.transaction(s.repo.fork(), async (tx) => {
        const d = await s.repo.lockDatabase(tx, gone);
        d!.removedAt = at(4);
        d!.updatedAt = at(4);
      });
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect((await s.repo.lockDatabase(tx, live))!.name).to.equal('live');
        expect(
          await s.repo.lockDatabase(tx, live, ownedBy(actorOf(a.organizationId, member, 'member'))),
        ).to.equal(null);
        expect(await s.repo.lockDatabase(tx, gone)).to.equal(null);
        expect((await s.repo.lockDatabase(tx, gone, {}, { removed: true }))!.removedAt!.getTime()).to.equal(
          at(4).getTime(),
        );
        expect(await s.repo.nameTaken(tx, a.organizationId, 'live')).to.equal(true);
        expect(await s.repo.nameTaken(tx, a.organizationId, 'gone')).to.equal(false);
        expect(await s.repo.lockPlan(tx, a.organizationId)).to.deep.equal({
          plan: 'starter',
          status: 'active',
        });
        // Neither the removed one nor the one being deleted counts.
        expect(await s.repo.lockedDatabaseCount(tx, s.deps, a.organizationId)).to.equal(1);
      });
      expect(await s.repo.findLiveDatabase(s.repo.fork(), gone)).to.equal(null);
    });

    it('keeps backups of a database: a page by type and status, the pending one, the latest final, the usage', async () => {
      const a = await s.world.organization();
      const id = await database(a.organizationId, a.userId, 1, { status: 'running' });
      const backup = (seconds: number, type: 'manual' | 'final', status: 'pending' | 'completed') =>
        s.repo.transaction(s.repo.fork(), async (tx) => {
          const d = await s.repo.lockDatabase(tx, id);
          return s.repo.createBackup(tx, {
            id: newId('backup'),
            createdAt: at(seconds),
            updatedAt: at(seconds),
            database: d!,
            type,
            status,
            name: `b-${seconds}`,
            description: null,
            sizeBytes: status === 'completed' ? 1000 * seconds : null,
            completedAt: status === 'completed' ? at(seconds) : null,
            expiresAt: null,
          }).id;
        });
      const b1 = await backup(2, 'manual', 'completed');
      const b2 = await backup(3, 'final', 'pending');
      const b3 = await backup(4, 'manual', 'pending');
      const em = s.repo.fork();
      const ids = (p: { items: { id: string }[] }) => p.items.map((x) => x.id);

      const page = await s.repo.backupPage(em, id, {}, { page: 1, limit: 10 });
      expect(ids(page)).to.deep.equal([b3, b2, b1]);
      expect(page).to.include({ total: 3, hasMore: false });
      expect(ids(await s.repo.backupPage(em, id, { type: 'manual' }, { page: 1, limit: 10 }))).to.deep.equal([
        b3,
        b1,
      ]);
      expect(
        ids(await s.repo.backupPage(em, id, { status: 'pending' }, { page: 1, limit: 1 })),
      ).to.deep.equal([b3]);
      expect((await s.repo.findPendingBackup(em, b2))!.id).to.equal(b2);
      expect(await s.repo.findPendingBackup(em, b1)).to.equal(null);
      expect((await s.repo.latestFinalBackup(em, id))!.id).to.equal(b2);
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect(await s.repo.lockedBackupUsage(tx, a.organizationId)).to.deep.equal({
          manual: 2,
          bytes: 2000,
        });
        expect((await s.repo.lockBackupsOf(tx, id)).map((b) => b.id)).to.deep.equal([b1, b2, b3]);
      });
    });
  });
}
