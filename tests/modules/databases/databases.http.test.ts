// Test tier: server
import { expect } from 'chai';
import { sha256Hex } from '../../../server/lib/crypto.js';
import type { AppDeps } from '../../../server/kit/deps.js';
import { SimulatedDatabaseDriver } from '../../../server/modules/databases/simulated-databases.driver.js';
import { appRouter } from '../../../server/router.js';
import { createInProcessContext } from '../../../server/trpc/context.js';
import { createCallerFactory } from '../../../server/trpc/init.js';
import { createOrg, createUser, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import {
  countDatabases,
  createDatabase,
  dbName,
  eventsOf,
  getDatabase,
  runningDatabase,
  storedBackups,
  storedDatabase,
  waitBackupCompleted,
  waitStatus,
} from './databases-helpers.js';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

const LIST_KEYS = [
  'id',
  'name',
  'engine',
  'version',
  'status',
  'region',
  'size',
  'storage',
  'connection_string',
  'metrics',
  'backup_enabled',
  'multi_az',
  'backup_retention',
  'user_id',
  'created_at',
  'updated_at',
  'last_backup',
  'next_backup',
  'deletion_scheduled',
];
const DETAIL_KEYS = [
  ...LIST_KEYS,
  'connection_info',
  'specs',
  'restored_from_backup_id',
  'read_only',
  'status_reason',
];
const BACKUP_KEYS = [
  'id',
  'database_id',
  'name',
  'description',
  'type',
  'status',
  'failure_reason',
  'size',
  'size_bytes',
  'engine',
  'version',
  'created_at',
  'completed_at',
  'expires_at',
];

describe('Databases over HTTP', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  /** Long enough that the next requests surely come before the change is done, however busy the machine. */
  const SLOW_MS = 10_000;

  /** Creates a database whose provisioning (and later changes) take `delayMs` (the shared server's workers run them). */
  /**
   * The shared server's deps with changes that take `delayMs`: the setting, and a driver built with it (the server's
   * driver is built once at start, from its own setting).
   */
  function slowDepsOf(delayMs: number): AppDeps {
    return {
      ...s.deps,
      config: { ...s.deps.config, provisioningDelayMs: delayMs },
      modules: {
        ...s.deps.modules,
        databases: { ...s.deps.modules.databases, driver: new SimulatedDatabaseDriver(delayMs) },
      },
    };
  }

  async function createSlowly(token: string, body: Record<string, unknown> = {}, delayMs = SLOW_MS) {
    const deps = slowDepsOf(delayMs);
    const caller = createCallerFactory(appRouter)(createInProcessContext(deps, { token }));
    const { database } = await caller.databases.create({
      name: dbName('slow'),
      engine: 'postgresql',
      ...body,
    });
    return { database, caller };
  }

  const put = (token: string, id: string, body: unknown) =>
    http(s.baseUrl, 'PUT', `/v1/databases/${id}`, { token, body });
  const del = (token: string, id: string) => http(s.baseUrl, 'DELETE', `/v1/databases/${id}`, { token });
  const backup = (token: string, id: string, body: unknown = {}) =>
    http(s.baseUrl, 'POST', `/v1/databases/${id}/backups`, { token, body });
  const backups = (token: string, id: string, q = '') =>
    http(s.baseUrl, 'GET', `/v1/databases/${id}/backups${q}`, { token });
  const cancel = (token: string, id: string) =>
    http(s.baseUrl, 'POST', `/v1/databases/${id}/cancel-deletion`, { token, body: {} });
  const resetPassword = (token: string, id: string) =>
    http(s.baseUrl, 'POST', `/v1/databases/${id}/reset-password`, { token, body: {} });

  describe('POST /v1/databases', () => {
    it('creates a PostgreSQL database with the defaults: 201, Location, the password once', async () => {
      const owner = await createOrg(s.deps);
      const name = dbName('orders');
      const res = await http(s.baseUrl, 'POST', '/v1/databases', {
        token: owner.token,
        body: { name, engine: 'postgresql' },
      });
      expect(res.status, res.text).to.equal(201);
      expect(res.headers.get('content-type')).to.match(/^application\/json/);
      const d = res.body.database;
      expect(Object.keys(res.body).sort()).to.deep.equal(['database', 'success']);
      expect(res.body.success).to.equal(true);
      expect(Object.keys(d).sort()).to.deep.equal([...DETAIL_KEYS].sort());
      expect(d.id).to.match(/^db_[a-z0-9]{20}$/);
      expect(res.headers.get('location')).to.equal(`${s.deps.config.publicBaseUrl}/v1/databases/${d.id}`);
      expect(d).to.include({
        name,
        engine: 'postgresql',
        version: '16',
        status: 'creating',
        region: 'us-east',
        size: 'small',
        storage: '20 GB',
        backup_enabled: true,
        multi_az: false,
        backup_retention: 7,
        user_id: owner.id,
        last_backup: null,
        deletion_scheduled: null,
        restored_from_backup_id: null,
      });
      expect(d.created_at).to.match(ISO);
      expect(d.updated_at).to.equal(d.created_at);
      // The first automatic backup is due one BACKUP_INTERVAL (24 h by default) after creation.
      expect(Date.parse(d.next_backup) - Date.parse(d.created_at)).to.equal(
        s.deps.config.databases.backupIntervalMs,
      );
      expect(d.metrics).to.deep.equal({
        cpu_usage: 0,
        memory_usage: 0,
        storage_usage: 0,
        connections: { active: 0, max: 50 },
      });
      expect(d.specs).to.deep.equal({ vcpus: 1, memory: '2 GB', storage: '20 GB', monthly_price: 29 });

      const info = d.connection_info;
      expect(Object.keys(info).sort()).to.deep.equal([
        'database',
        'host',
        'password',
        'port',
        'simulated',
        'ssl_required',
        'user',
      ]);
      expect(info.host).to.match(new RegExp(`^${name}-[a-z0-9]+\\.us-east\\.db\\.example\\.com$`));
      expect(info).to.include({ port: 5432, ssl_required: true, simulated: true });
      expect(info.password).to.match(/^[A-Za-z0-9]{32}$/);
      expect(d.connection_string).to.equal(
        `postgresql://${info.user}:${info.password}@${info.host}:5432/${info.database}?sslmode=require`,
      );
      expect(new URL(d.connection_string).password).to.equal(info.password);

      // Stored as a hash only.
      const stored = await storedDatabase(s.deps, d.id);
      expect(stored!.passwordHash).to.equal(sha256Hex(info.password));
      const rows = await s.deps.db.orm.em.fork().execute(`select * from databases where id = ?`, [d.id]);
      expect(JSON.stringify(rows)).not.to.include(info.password);

      const created = await eventsOf(s.deps, owner.organizationId, 'database.created');
      expect(created).to.have.length(1);
      const object = created[0]!.data.object as any;
      expect(object).to.include({ id: d.id, status: 'creating', name });
      expect(object.connection_string).to.equal(d.connection_string.replace(info.password, '****'));
      expect(object.connection_info).not.to.have.property('password');
    });

    it('uses each engine’s default version, port and URL scheme', async () => {
      const owner = await createOrg(s.deps, { plan: 'pro' });
      const cases = [
        [
          'postgresql',
          '16',
          5432,
          /^postgresql:\/\/dbadmin:[A-Za-z0-9]{32}@[^/]+:5432\/defaultdb\?sslmode=require$/,
        ],
        [
          'mysql',
          '8.4',
          3306,
          /^mysql:\/\/dbadmin:[A-Za-z0-9]{32}@[^/]+:3306\/defaultdb\?ssl-mode=REQUIRED$/,
        ],
        [
          'mongodb',
          '7.0',
          27017,
          /^mongodb:\/\/dbadmin:[A-Za-z0-9]{32}@[^/]+:27017\/defaultdb\?tls=true&authSource=admin$/,
        ],
      ] as const;
      for (const [engine, version, port, url] of cases) {
        const res = await createDatabase(s.baseUrl, owner.token, { engine });
        expect(res.status, res.text).to.equal(201);
        expect(res.body.database).to.include({ engine, version });
        expect(res.body.database.connection_info.port).to.equal(port);
        expect(res.body.database.connection_string).to.match(url);
      }
    });

    it('takes every field: version, size, region, backups, multi-AZ, retention', async () => {
      const owner = await createOrg(s.deps);
      const res = await createDatabase(s.baseUrl, owner.token, {
        engine: 'mysql',
        version: '8.0',
        size: 'xl',
        region: 'ap-northeast',
        backup_enabled: false,
        multi_az: true,
        backup_retention: 30,
      });
      expect(res.status, res.text).to.equal(201);
      expect(res.body.database).to.include({
        engine: 'mysql',
        version: '8.0',
        size: 'xl',
        storage: '1 TB',
        region: 'ap-northeast',
        backup_enabled: false,
        multi_az: true,
        backup_retention: 30,
        next_backup: null,
      });
      expect(res.body.database.connection_info.host).to.match(/\.ap-northeast\.db\.example\.com$/);
      expect(res.body.database.metrics.connections.max).to.equal(400);
      expect(res.body.database.specs).to.deep.equal({
        vcpus: 8,
        memory: '16 GB',
        storage: '1 TB',
        monthly_price: 499,
      });
    });

    it('refuses bad input with 400 naming the field, and creates nothing', async () => {
      const owner = await createOrg(s.deps);
      const cases: [Record<string, unknown>, string][] = [
        [{ engine: 'postgresql' }, 'name'],
        [{ name: '', engine: 'postgresql' }, 'name'],
        [{ name: 'Orders', engine: 'postgresql' }, 'name'],
        [{ name: '1orders', engine: 'postgresql' }, 'name'],
        [{ name: 'my_db', engine: 'postgresql' }, 'name'],
        [{ name: 'a'.repeat(64), engine: 'postgresql' }, 'name'],
        [{ name: 'ok' }, 'engine'],
        [{ name: 'ok', engine: 'oracle' }, 'engine'],
        [{ name: 'ok', engine: 'postgresql', version: '8.4' }, 'version'],
        [{ name: 'ok', engine: 'mysql', version: '16' }, 'version'],
        [{ name: 'ok', engine: 'mongodb', version: '5.0' }, 'version'],
        [{ name: 'ok', engine: 'postgresql', version: 16 }, 'version'],
        [{ name: 'ok', engine: 'postgresql', size: 'huge' }, 'size'],
        [{ name: 'ok', engine: 'postgresql', region: 'mars-north' }, 'region'],
        [{ name: 'ok', engine: 'postgresql', backup_enabled: 'yes' }, 'backup_enabled'],
        [{ name: 'ok', engine: 'postgresql', backup_retention: 0 }, 'backup_retention'],
        [{ name: 'ok', engine: 'postgresql', backup_retention: 36 }, 'backup_retention'],
        [{ name: 'ok', engine: 'postgresql', status: 'running' }, 'status'],
        [{ name: 'ok', engine: 'postgresql', password: 'chosen-by-me' }, 'password'],
      ];
      for (const [body, path] of cases) {
        const res = await http(s.baseUrl, 'POST', '/v1/databases', { token: owner.token, body });
        expect(res.status, JSON.stringify(body)).to.equal(400);
        expect(res.body.error.code).to.equal('VALIDATION_ERROR');
        expect(
          res.body.error.details.map((d: any) => d.path),
          JSON.stringify(body),
        ).to.include(path);
      }
      expect(await countDatabases(s.deps, owner.organizationId)).to.equal(0);
      expect(await eventsOf(s.deps, owner.organizationId, 'database.created')).to.have.length(0);
    });

    it('keeps a name unique in the organization (409) while another organization may use it', async () => {
      const a = await createOrg(s.deps);
      const b = await createOrg(s.deps);
      const name = dbName('shared');
      expect((await createDatabase(s.baseUrl, a.token, { name })).status).to.equal(201);
      const again = await createDatabase(s.baseUrl, a.token, { name, engine: 'mysql' });
      expect(again.status).to.equal(409);
      expect(again.body.error.code).to.equal('CONFLICT');
      expect(again.body.error.message).to.include(name);
      expect(await countDatabases(s.deps, a.organizationId)).to.equal(1);
      expect((await createDatabase(s.baseUrl, b.token, { name })).status).to.equal(201);
    });

    it('accepts a 63-character name and keeps the host a valid DNS name', async () => {
      const owner = await createOrg(s.deps);
      const name = `x${'a'.repeat(61)}z`;
      const res = await createDatabase(s.baseUrl, owner.token, { name });
      expect(res.status, res.text).to.equal(201);
      const labels = res.body.database.connection_info.host.split('.');
      expect(labels[0]).to.match(/^xa+-[a-z0-9]{8}$/);
      expect(labels.every((l: string) => l.length >= 1 && l.length <= 63)).to.equal(true);
    });

    it('becomes running after PROVISIONING_DELAY_MS (within seconds, not minutes), emitting nothing else', async () => {
      const owner = await createOrg(s.deps);
      const created = await createDatabase(s.baseUrl, owner.token, { size: 'medium' });
      const d = await waitStatus(s.baseUrl, owner.token, created.body.database.id, 'running');
      const took = Date.parse(d.updated_at) - Date.parse(d.created_at);
      expect(took).to.be.at.least(s.deps.config.provisioningDelayMs);
      expect(took).to.be.at.most(s.deps.config.provisioningDelayMs + 3000);
      expect(d.metrics.connections.max).to.equal(100);
      for (const k of ['cpu_usage', 'memory_usage', 'storage_usage'] as const) {
        expect(d.metrics[k]).to.be.within(0, 100);
      }
      expect(d.metrics.connections.active).to.be.within(0, 100);
      const events = await eventsOf(s.deps, owner.organizationId);
      expect(events.map((e) => e.type).filter((t) => t.startsWith('database.'))).to.deep.equal([
        'database.created',
      ]);
    });
  });

  describe('GET /v1/databases and /v1/databases/:id', () => {
    it('pages newest first with total, page and limit; filters by engine, status and region', async () => {
      const owner = await createOrg(s.deps, { plan: 'pro' });
      const ids: string[] = [];
      for (const body of [
        { engine: 'postgresql', region: 'eu-west' },
        { engine: 'mysql', region: 'us-east' },
        { engine: 'mongodb', region: 'eu-west' },
      ]) {
        ids.push((await createDatabase(s.baseUrl, owner.token, body)).body.database.id);
      }
      const creating = await http(s.baseUrl, 'GET', '/v1/databases?status=creating', { token: owner.token });
      expect(creating.body.databases.every((d: any) => d.status === 'creating')).to.equal(true);
      // Compared once they no longer change: list and detail views agree.
      for (const id of ids) await waitStatus(s.baseUrl, owner.token, id, 'running');
      const list = await http(s.baseUrl, 'GET', '/v1/databases?limit=2', { token: owner.token });
      expect(list.status).to.equal(200);
      expect(Object.keys(list.body).sort()).to.deep.equal([
        'databases',
        'has_more',
        'limit',
        'page',
        'success',
        'total',
      ]);
      expect(list.body).to.include({ success: true, total: 3, page: 1, limit: 2 });
      expect(list.body.databases.map((d: any) => d.id)).to.deep.equal([ids[2], ids[1]]);
      for (const item of list.body.databases) {
        expect(Object.keys(item).sort()).to.deep.equal([...LIST_KEYS].sort());
        expect(Object.keys(item.metrics).sort()).to.deep.equal([
          'cpu_usage',
          'memory_usage',
          'storage_usage',
        ]);
        expect(item.connection_string).to.match(/^[a-z]+:\/\/dbadmin:\*\*\*\*@/);
        // The list view agrees with the detail view (metrics move with time: compared apart).
        const { database } = (await getDatabase(s.baseUrl, owner.token, item.id)).body;
        const pick = (o: any) =>
          Object.fromEntries(LIST_KEYS.filter((k) => k !== 'metrics').map((k) => [k, o[k]]));
        expect(pick(item)).to.deep.equal(pick(database));
      }
      const page2 = await http(s.baseUrl, 'GET', '/v1/databases?limit=2&page=2', { token: owner.token });
      expect(page2.body.databases.map((d: any) => d.id)).to.deep.equal([ids[0]]);
      const far = await http(s.baseUrl, 'GET', '/v1/databases?page=9', { token: owner.token });
      expect(far.body).to.include({ total: 3, page: 9, limit: 20 });
      expect(far.body.databases).to.deep.equal([]);

      const q = async (query: string) =>
        (await http(s.baseUrl, 'GET', `/v1/databases?${query}`, { token: owner.token })).body;
      expect((await q('engine=mysql')).databases.map((d: any) => d.id)).to.deep.equal([ids[1]]);
      const eu = await q('region=eu-west');
      expect(eu.databases.map((d: any) => d.id)).to.deep.equal([ids[2], ids[0]]);
      expect(eu.total).to.equal(2);
      expect((await q('region=eu-west&engine=postgresql')).databases.map((d: any) => d.id)).to.deep.equal([
        ids[0],
      ]);
      const running = await q('status=running');
      expect(running.databases.map((d: any) => d.id)).to.deep.equal([ids[2], ids[1], ids[0]]);
      expect((await q('status=deleting')).total).to.equal(0);
      // Unknown query parameters are ignored.
      expect((await q('colour=blue')).total).to.equal(3);

      for (const bad of ['limit=0', 'limit=101', 'page=0', 'engine=oracle', 'status=gone', 'region=moon']) {
        const res = await http(s.baseUrl, 'GET', `/v1/databases?${bad}`, { token: owner.token });
        expect(res.status, bad).to.equal(400);
        expect(res.body.error.code).to.equal('VALIDATION_ERROR');
      }
    });

    it('shows the detail view with the password masked and no password field', async () => {
      const owner = await createOrg(s.deps);
      const created = (await createDatabase(s.baseUrl, owner.token, { engine: 'mongodb', size: 'large' }))
        .body.database;
      const res = await getDatabase(s.baseUrl, owner.token, created.id);
      expect(res.status).to.equal(200);
      expect(Object.keys(res.body).sort()).to.deep.equal(['database', 'success']);
      const d = res.body.database;
      expect(Object.keys(d).sort()).to.deep.equal([...DETAIL_KEYS].sort());
      expect(d.connection_info).to.deep.equal({
        host: created.connection_info.host,
        port: 27017,
        database: 'defaultdb',
        user: 'dbadmin',
        ssl_required: true,
        simulated: true,
      });
      expect(d.connection_string).to.equal(
        created.connection_string.replace(created.connection_info.password, '****'),
      );
      expect(res.text).not.to.include(created.connection_info.password);
      expect(d.storage).to.equal('500 GB');
      expect(d.metrics.connections.max).to.equal(200);
    });

    it('answers 404 for unknown, malformed and removed ids', async () => {
      const owner = await createOrg(s.deps);
      for (const id of ['nope', 'db_', 'backup_abc', 'db_doesnotexist000000', `db_${'a'.repeat(300)}`]) {
        const res = await getDatabase(s.baseUrl, owner.token, id);
        expect(res.status, id).to.equal(404);
        expect(res.body.error.code).to.equal('NOT_FOUND');
      }
    });
  });

  describe('PUT /v1/databases/:id', () => {
    it('resizes a running database: resizing, then running at the new size (database.updated)', async () => {
      const owner = await createOrg(s.deps);
      const d = await runningDatabase(s.baseUrl, owner.token);
      const res = await put(owner.token, d.id, { size: 'large' });
      expect(res.status, res.text).to.equal(200);
      expect(Object.keys(res.body).sort()).to.deep.equal(['database', 'success']);
      expect(res.body.database).to.include({ status: 'resizing', size: 'large', storage: '500 GB' });
      expect(res.body.database.connection_info).not.to.have.property('password');
      expect(res.body.database.connection_string).to.include(':****@');
      const updated = await eventsOf(s.deps, owner.organizationId, 'database.updated');
      expect(updated).to.have.length(1);
      expect(updated[0]!.data.object).to.include({ id: d.id, status: 'resizing', size: 'large' });

      const after = await waitStatus(s.baseUrl, owner.token, d.id, 'running');
      expect(after).to.include({ size: 'large', storage: '500 GB' });
      expect(after.metrics.connections.max).to.equal(200);
      expect(after.specs.vcpus).to.equal(4);
    });

    it('answers 409 unless running, and changes nothing', async () => {
      const owner = await createOrg(s.deps);
      const { database } = await createSlowly(owner.token);
      const res = await put(owner.token, database.id, { size: 'medium' });
      expect(res.status).to.equal(409);
      expect(res.body.error.code).to.equal('CONFLICT');
      expect(res.body.error.message).to.include('creating');

      const running = await runningDatabase(s.baseUrl, owner.token);
      // Resizing for SLOW_MS: a second change meanwhile is refused.
      const slowDeps = slowDepsOf(SLOW_MS);
      const slow = createCallerFactory(appRouter)(createInProcessContext(slowDeps, { token: owner.token }));
      await slow.databases.update({ id: running.id, size: 'medium' });
      for (const body of [{ size: 'large' }, { backup_enabled: false }, { backup_retention: 9 }, {}]) {
        const again = await put(owner.token, running.id, body);
        expect(again.status, JSON.stringify(body)).to.equal(409);
      }
      const now = (await getDatabase(s.baseUrl, owner.token, running.id)).body.database;
      expect(now).to.include({
        status: 'resizing',
        size: 'medium',
        backup_enabled: true,
        backup_retention: 7,
      });
    });

    it('changes backups and retention; validates strictly; a PUT without change emits nothing', async () => {
      const owner = await createOrg(s.deps);
      const d = await runningDatabase(s.baseUrl, owner.token);
      const off = await put(owner.token, d.id, { backup_enabled: false, backup_retention: 35 });
      expect(off.status).to.equal(200);
      expect(off.body.database).to.include({
        status: 'running',
        backup_enabled: false,
        backup_retention: 35,
        next_backup: null,
      });
      const on = await put(owner.token, d.id, { backup_enabled: true, backup_retention: 1 });
      expect(on.body.database).to.include({ backup_enabled: true, backup_retention: 1 });
      expect(on.body.database.next_backup).to.match(ISO);
      expect(await eventsOf(s.deps, owner.organizationId, 'database.updated')).to.have.length(2);

      const same = await put(owner.token, d.id, { backup_retention: 1, size: 'small' });
      expect(same.status).to.equal(200);
      expect(same.body.database.updated_at).to.equal(on.body.database.updated_at);
      expect((await put(owner.token, d.id, {})).status).to.equal(200);
      expect(await eventsOf(s.deps, owner.organizationId, 'database.updated')).to.have.length(2);

      for (const body of [
        { backup_retention: 0 },
        { backup_retention: 36 },
        { backup_retention: 7.5 },
        { size: 'tiny' },
        { name: 'renamed' },
        { engine: 'mysql' },
        { backup_enabled: 'false' },
      ]) {
        const bad = await put(owner.token, d.id, body);
        expect(bad.status, JSON.stringify(body)).to.equal(400);
        expect(bad.body.error.code).to.equal('VALIDATION_ERROR');
      }
      const final = (await getDatabase(s.baseUrl, owner.token, d.id)).body.database;
      expect(final).to.include({ name: d.name, engine: 'postgresql', backup_retention: 1, size: 'small' });
    });
  });

  describe('backups', () => {
    it('takes a manual backup: 202 pending, then completed (database.backup.completed, last_backup)', async () => {
      const owner = await createOrg(s.deps);
      const d = await runningDatabase(s.baseUrl, owner.token, { engine: 'mysql' });
      const res = await backup(owner.token, d.id, { name: 'before-migration', description: 'Schema v2' });
      expect(res.status, res.text).to.equal(202);
      expect(Object.keys(res.body).sort()).to.deep.equal(['backup', 'success']);
      const b = res.body.backup;
      expect(Object.keys(b).sort()).to.deep.equal([...BACKUP_KEYS].sort());
      expect(b.id).to.match(/^backup_[a-z0-9]{20}$/);
      expect(b).to.include({
        database_id: d.id,
        name: 'before-migration',
        description: 'Schema v2',
        type: 'manual',
        status: 'pending',
        size: null,
        size_bytes: null,
        engine: 'mysql',
        version: '8.4',
        completed_at: null,
        expires_at: null,
      });
      expect(res.headers.get('location')).to.equal(null);

      const done = await waitBackupCompleted(s.baseUrl, owner.token, d.id, b.id);
      expect(done.size).to.match(/^\d+(\.\d)? (KB|MB|GB|TB)$/);
      expect(done.size_bytes).to.be.a('number').above(0);
      expect(done.completed_at).to.match(ISO);
      expect(done.expires_at).to.equal(null);
      const took = Date.parse(done.completed_at) - Date.parse(done.created_at);
      expect(took).to.be.at.least(s.deps.config.provisioningDelayMs);

      const events = await eventsOf(s.deps, owner.organizationId, 'database.backup.completed');
      expect(events).to.have.length(1);
      expect(events[0]!.data.object).to.deep.equal(done);
      const after = (await getDatabase(s.baseUrl, owner.token, d.id)).body.database;
      expect(after.last_backup).to.equal(done.completed_at);
    });

    it('names a backup by default, and refuses bad input (400) or a database that is not running (409)', async () => {
      const owner = await createOrg(s.deps);
      const d = await runningDatabase(s.baseUrl, owner.token);
      const unnamed = await backup(owner.token, d.id);
      expect(unnamed.status).to.equal(202);
      expect(unnamed.body.backup.name).to.match(new RegExp(`^${d.name}-manual-\\d{8}-\\d{6}$`));
      expect(unnamed.body.backup.description).to.equal(null);
      for (const body of [
        { name: '' },
        { name: 'x'.repeat(101) },
        { description: 'x'.repeat(501) },
        { type: 'final' },
      ]) {
        const bad = await backup(owner.token, d.id, body);
        expect(bad.status, JSON.stringify(body)).to.equal(400);
      }
      const { database } = await createSlowly(owner.token);
      const creating = await backup(owner.token, database.id);
      expect(creating.status).to.equal(409);
      expect(creating.body.error.code).to.equal('CONFLICT');
      expect((await backups(owner.token, database.id)).body.total).to.equal(0);
      expect((await backup(owner.token, 'db_unknown0000000000000')).status).to.equal(404);
    });

    it('lists a database’s backups newest first (page list), filtered by type and status', async () => {
      const owner = await createOrg(s.deps);
      const d = await runningDatabase(s.baseUrl, owner.token);
      const other = await runningDatabase(s.baseUrl, owner.token);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++)
        ids.push((await backup(owner.token, d.id, { name: `b${i}` })).body.backup.id);
      await backup(owner.token, other.id);
      const res = await backups(owner.token, d.id, '?limit=2');
      expect(res.status).to.equal(200);
      expect(Object.keys(res.body).sort()).to.deep.equal([
        'backups',
        'has_more',
        'limit',
        'page',
        'success',
        'total',
      ]);
      expect(res.body).to.include({ total: 3, page: 1, limit: 2 });
      expect(res.body.backups.map((b: any) => b.id)).to.deep.equal([ids[2], ids[1]]);
      const page2 = await backups(owner.token, d.id, '?limit=2&page=2');
      expect(page2.body.backups.map((b: any) => b.id)).to.deep.equal([ids[0]]);
      expect((await backups(owner.token, d.id, '?type=automatic')).body.total).to.equal(0);
      expect((await backups(owner.token, d.id, '?type=manual')).body.total).to.equal(3);
      for (const id of ids) await waitBackupCompleted(s.baseUrl, owner.token, d.id, id);
      expect((await backups(owner.token, d.id, '?status=completed')).body.total).to.equal(3);
      expect((await backups(owner.token, d.id, '?status=pending')).body.total).to.equal(0);
      for (const q of ['?type=nightly', '?status=done', '?limit=0']) {
        expect((await backups(owner.token, d.id, q)).status, q).to.equal(400);
      }
    });
  });

  describe('DELETE /v1/databases/:id and cancel-deletion', () => {
    it('initiates the deletion: 202 with a final backup and the scheduled removal; then 409 for changes', async () => {
      const owner = await createOrg(s.deps);
      const d = await runningDatabase(s.baseUrl, owner.token);
      const res = await del(owner.token, d.id);
      expect(res.status, res.text).to.equal(202);
      expect(Object.keys(res.body).sort()).to.deep.equal([
        'deletion_scheduled',
        'final_backup',
        'id',
        'message',
        'success',
      ]);
      expect(res.body).to.include({ success: true, id: d.id });
      expect(res.body.message).to.be.a('string').and.not.empty;
      expect(res.body.final_backup).to.match(/^backup_[a-z0-9]{20}$/);
      expect(res.body.deletion_scheduled).to.match(ISO);

      const shown = (await getDatabase(s.baseUrl, owner.token, d.id)).body.database;
      expect(shown).to.include({
        status: 'deleting',
        deletion_scheduled: res.body.deletion_scheduled,
        next_backup: null,
      });
      expect(Date.parse(shown.deletion_scheduled) - Date.parse(shown.updated_at)).to.equal(
        s.deps.config.databases.deletionGraceMs,
      );
      const final = (await backups(owner.token, d.id)).body.backups[0];
      expect(final).to.include({ id: res.body.final_backup, type: 'final' });
      expect(Date.parse(final.expires_at) - Date.parse(res.body.deletion_scheduled)).to.equal(7 * 86_400_000);
      await waitBackupCompleted(s.baseUrl, owner.token, d.id, res.body.final_backup);

      const deleted = await eventsOf(s.deps, owner.organizationId, 'database.deleted');
      expect(deleted).to.have.length(1);
      expect(deleted[0]!.data.object).to.include({ id: d.id, status: 'deleting' });

      expect((await put(owner.token, d.id, { size: 'medium' })).status).to.equal(409);
      expect((await backup(owner.token, d.id)).status).to.equal(409);
      expect((await resetPassword(owner.token, d.id)).status).to.equal(409);
      const twice = await del(owner.token, d.id);
      expect(twice.status).to.equal(409);
      expect(twice.body.error.code).to.equal('CONFLICT');
      expect(await eventsOf(s.deps, owner.organizationId, 'database.deleted')).to.have.length(1);
      // Still listed, with its state.
      const listed = await http(s.baseUrl, 'GET', '/v1/databases?status=deleting', { token: owner.token });
      expect(listed.body.databases.map((x: any) => x.id)).to.deep.equal([d.id]);
    });

    it('cancels a deletion: 200 {success, database} running again (database.updated); 409 when not deleting', async () => {
      const owner = await createOrg(s.deps);
      const d = await runningDatabase(s.baseUrl, owner.token);
      expect((await cancel(owner.token, d.id)).status).to.equal(409);
      const deleted = await del(owner.token, d.id);
      const res = await cancel(owner.token, d.id);
      expect(res.status, res.text).to.equal(200);
      expect(Object.keys(res.body).sort()).to.deep.equal(['database', 'success']);
      expect(res.body.database).to.include({ id: d.id, status: 'running', deletion_scheduled: null });
      expect(res.body.database.next_backup).to.match(ISO);
      const updated = await eventsOf(s.deps, owner.organizationId, 'database.updated');
      expect(updated.map((e) => (e.data.object as any).status)).to.deep.equal(['running']);
      // The final backup is kept, without expiry.
      await waitBackupCompleted(s.baseUrl, owner.token, d.id, deleted.body.final_backup);
      const kept = (await backups(owner.token, d.id)).body.backups.find(
        (b: any) => b.id === deleted.body.final_backup,
      );
      expect(kept).to.include({ type: 'final', expires_at: null });
      // Usable as before, and deletable again.
      expect((await put(owner.token, d.id, { backup_retention: 10 })).status).to.equal(200);
      expect((await del(owner.token, d.id)).status).to.equal(202);
    });

    it('answers 404 for another organization’s database and for a malformed id, changing nothing', async () => {
      const a = await createOrg(s.deps);
      const b = await createOrg(s.deps);
      const d = (await createDatabase(s.baseUrl, a.token)).body.database;
      for (const res of [
        await del(b.token, d.id),
        await cancel(b.token, d.id),
        await resetPassword(b.token, d.id),
        await put(b.token, d.id, { size: 'xl' }),
        await backup(b.token, d.id),
        await backups(b.token, d.id),
        await del(a.token, 'not-a-db'),
      ]) {
        expect(res.status).to.equal(404);
        expect(res.body.error.code).to.equal('NOT_FOUND');
      }
      const stored = await storedDatabase(s.deps, d.id);
      expect(stored!.size).to.equal('small');
      expect(stored!.status).to.be.oneOf(['creating', 'running']);
      expect(await storedBackups(s.deps, d.id)).to.have.length(0);
    });
  });

  describe('POST /v1/databases/:id/reset-password', () => {
    it('hands out a new password once; the old hash is replaced; every later view masks it', async () => {
      const owner = await createOrg(s.deps);
      const created = await createDatabase(s.baseUrl, owner.token);
      const d = created.body.database;
      const old = d.connection_info.password;
      const res = await resetPassword(owner.token, d.id);
      expect(res.status, res.text).to.equal(200);
      expect(Object.keys(res.body).sort()).to.deep.equal(['database', 'password', 'success']);
      const password = res.body.password;
      expect(password)
        .to.match(/^[A-Za-z0-9]{32}$/)
        .and.not.equal(old);
      expect(res.body.database.connection_info.password).to.equal(password);
      expect(res.body.database.connection_string).to.include(`:${password}@`);
      expect((await storedDatabase(s.deps, d.id))!.passwordHash).to.equal(sha256Hex(password));
      const later = await getDatabase(s.baseUrl, owner.token, d.id);
      expect(later.text).not.to.include(password);
      const updated = await eventsOf(s.deps, owner.organizationId, 'database.updated');
      expect(updated).to.have.length(1);
      expect(JSON.stringify(updated[0]!.data)).not.to.include(password);
    });
  });

  describe('restore (POST /v1/databases with backup_id)', () => {
    it('creates a database from a completed backup, with the source’s version, size and region by default', async () => {
      const owner = await createOrg(s.deps, { plan: 'pro' });
      const source = await runningDatabase(s.baseUrl, owner.token, {
        engine: 'postgresql',
        version: '15',
        size: 'medium',
        region: 'eu-central',
      });
      const b = (await backup(owner.token, source.id)).body.backup;
      const pending = await createDatabase(s.baseUrl, owner.token, { backup_id: b.id });
      expect(pending.status).to.equal(409);
      expect(pending.body.error.message).to.include('pending');
      await waitBackupCompleted(s.baseUrl, owner.token, source.id, b.id);

      const res = await createDatabase(s.baseUrl, owner.token, { backup_id: b.id });
      expect(res.status, res.text).to.equal(201);
      expect(res.body.database).to.include({
        engine: 'postgresql',
        version: '15',
        size: 'medium',
        region: 'eu-central',
        status: 'creating',
        restored_from_backup_id: b.id,
      });
      expect(res.body.database.connection_info.password).to.match(/^[A-Za-z0-9]{32}$/);
      await waitStatus(s.baseUrl, owner.token, res.body.database.id, 'running');

      // Into a newer version, another size and region: fine. Into an older version, another engine: 409.
      const newer = await createDatabase(s.baseUrl, owner.token, {
        backup_id: b.id,
        version: '17',
        size: 'small',
        region: 'us-west',
      });
      expect(newer.status, newer.text).to.equal(201);
      expect(newer.body.database).to.include({ version: '17', size: 'small', region: 'us-west' });
      const older = await createDatabase(s.baseUrl, owner.token, { backup_id: b.id, version: '14' });
      expect(older.status).to.equal(409);
      const otherEngine = await createDatabase(s.baseUrl, owner.token, { backup_id: b.id, engine: 'mysql' });
      expect(otherEngine.status).to.equal(409);
      expect(otherEngine.body.error.code).to.equal('CONFLICT');
      expect(otherEngine.body.error.message).to.include('postgresql');
    });

    it('refuses an unknown backup, or another organization’s, with 400 on backup_id', async () => {
      const a = await createOrg(s.deps);
      const b = await createOrg(s.deps);
      const d = await runningDatabase(s.baseUrl, b.token);
      const theirs = (await backup(b.token, d.id)).body.backup;
      await waitBackupCompleted(s.baseUrl, b.token, d.id, theirs.id);
      for (const backupId of [theirs.id, 'backup_unknown000000000000', 'db_notabackup', 'x']) {
        const res = await createDatabase(s.baseUrl, a.token, { backup_id: backupId });
        expect(res.status, backupId).to.equal(400);
        expect(res.body.error.code).to.equal('VALIDATION_ERROR');
        expect(res.body.error.details).to.deep.equal([
          { path: 'backup_id', message: 'No such backup in this organization' },
        ]);
      }
      expect(await countDatabases(s.deps, a.organizationId)).to.equal(0);
    });
  });

  describe('plan limits', () => {
    async function fill(owner: TestUser, n: number) {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) {
        const r = await createDatabase(s.baseUrl, owner.token);
        expect(r.status, r.text).to.equal(201);
        ids.push(r.body.database.id);
      }
      return ids;
    }

    it('answers 402 PLAN_LIMIT_EXCEEDED beyond the starter limit of 2, with details', async () => {
      const owner = await createOrg(s.deps);
      await fill(owner, 2);
      const res = await createDatabase(s.baseUrl, owner.token);
      expect(res.status).to.equal(402);
      expect(res.body.error.code).to.equal('PLAN_LIMIT_EXCEEDED');
      expect(res.body.error.details).to.deep.equal([{ resource: 'databases', limit: 2, current: 2 }]);
      expect(await countDatabases(s.deps, owner.organizationId)).to.equal(2);
    });

    it('lets exactly one of 20 concurrent creates at limit − 1 through', async () => {
      const owner = await createOrg(s.deps);
      await fill(owner, 1);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          createDatabase(s.baseUrl, owner.token, { name: dbName(`race${i}`) }),
        ),
      );
      const statuses = results.map((r) => r.status);
      expect(
        statuses.filter((x) => x === 201),
        statuses.join(','),
      ).to.have.length(1);
      expect(statuses.filter((x) => x === 402)).to.have.length(19);
      expect(await countDatabases(s.deps, owner.organizationId)).to.equal(2);
    });

    it('lets exactly one of 20 concurrent creates of one name through', async () => {
      const owner = await createOrg(s.deps, { plan: 'enterprise' });
      const name = dbName('same');
      const results = await Promise.all(
        Array.from({ length: 20 }, () => createDatabase(s.baseUrl, owner.token, { name })),
      );
      const statuses = results.map((r) => r.status).sort();
      expect(statuses.filter((x) => x === 201)).to.have.length(1);
      expect(statuses.filter((x) => x === 409)).to.have.length(19);
    });

    it('does not count a database being deleted; canceling its deletion needs room again (402)', async () => {
      const owner = await createOrg(s.deps);
      const [first] = await fill(owner, 2);
      expect((await del(owner.token, first!)).status).to.equal(202);
      const third = await createDatabase(s.baseUrl, owner.token);
      expect(third.status, third.text).to.equal(201);
      const refused = await cancel(owner.token, first!);
      expect(refused.status).to.equal(402);
      expect(refused.body.error.code).to.equal('PLAN_LIMIT_EXCEEDED');
      expect(refused.body.error.details).to.deep.equal([{ resource: 'databases', limit: 2, current: 2 }]);
      expect((await getDatabase(s.baseUrl, owner.token, first!)).body.database.status).to.equal('deleting');
      expect((await del(owner.token, third.body.database.id)).status).to.equal(202);
      expect((await cancel(owner.token, first!)).status).to.equal(200);
    });
  });

  describe('ownership, scope and permissions', () => {
    it('shows members their own databases only; someone else’s is 404; owners act on every one', async () => {
      const owner = await createOrg(s.deps, { plan: 'pro' });
      const member = await createUser(s.deps, owner.organizationId, {
        permissions: ['database:write', 'database:delete'],
      });
      const mine = (await runningDatabase(s.baseUrl, member.token)).id;
      const owners = (await createDatabase(s.baseUrl, owner.token)).body.database.id;
      const list = await http(s.baseUrl, 'GET', '/v1/databases', { token: member.token });
      expect(list.body.databases.map((d: any) => d.id)).to.deep.equal([mine]);
      const asksOwners = await http(s.baseUrl, 'GET', `/v1/databases?user_id=${owner.id}`, {
        token: member.token,
      });
      expect(asksOwners.body.databases).to.deep.equal([]);
      for (const res of [
        await getDatabase(s.baseUrl, member.token, owners),
        await put(member.token, owners, { backup_enabled: false }),
        await del(member.token, owners),
        await backups(member.token, owners),
        await resetPassword(member.token, owners),
      ]) {
        expect(res.status).to.equal(404);
      }
      const all = await http(s.baseUrl, 'GET', '/v1/databases', { token: owner.token });
      expect(all.body.databases.map((d: any) => d.id)).to.deep.equal([owners, mine]);
      const byMember = await http(s.baseUrl, 'GET', `/v1/databases?user_id=${member.id}`, {
        token: owner.token,
      });
      expect(byMember.body.databases.map((d: any) => d.id)).to.deep.equal([mine]);
      const managed = await put(owner.token, mine, { backup_retention: 14 });
      expect(managed.status).to.equal(200);
      expect(managed.body.database.user_id).to.equal(member.id);
    });

    it('moves a deleted user’s databases to the user who deleted them; activity counts them', async () => {
      const owner = await createOrg(s.deps, { plan: 'pro' });
      const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const member = await createUser(s.deps, owner.organizationId, { permissions: ['database:write'] });
      const ids = [
        (await createDatabase(s.baseUrl, member.token)).body.database.id,
        (await createDatabase(s.baseUrl, member.token)).body.database.id,
      ];
      const before = await http(s.baseUrl, 'GET', `/v1/users/${member.id}`, { token: owner.token });
      expect(before.body.user.activity.databases_created).to.equal(2);
      const removed = await http(s.baseUrl, 'DELETE', `/v1/users/${member.id}`, { token: admin.token });
      expect(removed.status).to.equal(200);
      expect(removed.body.resources_transferred_to).to.equal(admin.id);
      for (const id of ids) {
        expect((await getDatabase(s.baseUrl, admin.token, id)).body.database.user_id).to.equal(admin.id);
      }
      const activity = await http(s.baseUrl, 'GET', `/v1/users/${admin.id}`, { token: owner.token });
      expect(activity.body.user.activity.databases_created).to.equal(2);
    });

    it('needs database:write to create, change, back up and reset; database:delete to delete and cancel', async () => {
      const owner = await createOrg(s.deps, { plan: 'pro' });
      const reader = await createUser(s.deps, owner.organizationId);
      const create = await createDatabase(s.baseUrl, reader.token);
      expect(create.status).to.equal(403);
      expect(create.body.error.code).to.equal('FORBIDDEN');
      const writer = await createUser(s.deps, owner.organizationId, { permissions: ['database:write'] });
      const d = await runningDatabase(s.baseUrl, writer.token);
      expect((await put(writer.token, d.id, { backup_retention: 3 })).status).to.equal(200);
      expect((await backup(writer.token, d.id)).status).to.equal(202);
      expect((await resetPassword(writer.token, d.id)).status).to.equal(200);
      expect((await backups(writer.token, d.id)).status).to.equal(200);
      expect((await del(writer.token, d.id)).status).to.equal(403);
      expect((await del(owner.token, d.id)).status).to.equal(202);
      expect((await cancel(writer.token, d.id)).status).to.equal(403);
      const deleter = await createUser(s.deps, owner.organizationId, {
        permissions: ['database:read', 'database:delete'],
      });
      // A member acts on their own databases only, whatever the permission.
      expect((await cancel(deleter.token, d.id)).status).to.equal(404);
    });
  });

  it('serves the same procedures in process (createCaller)', async () => {
    const owner = await createOrg(s.deps);
    const caller = s.caller(owner.token);
    const { database } = await caller.databases.create({ name: dbName('cli'), engine: 'mysql' });
    expect(database.connection_info.password).to.be.a('string');
    const list = await caller.databases.list();
    expect(list.databases.map((d) => d.id)).to.deep.equal([database.id]);
    const got = await caller.databases.get({ id: database.id });
    expect(got.database.connection_info.password).to.equal(undefined);
    const { backups: none } = await caller.databases.backups.list({ id: database.id });
    expect(none).to.deep.equal([]);
  });
});
