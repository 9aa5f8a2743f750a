// Test tier: server
import { expect } from 'chai';
import pg from 'pg';
import { compactListCounts } from '../../server/db/list-counts.js';
import { CONNECTION_STATUSES, VPN_PROTOCOLS } from '../../server/modules/vpn/vpn.constants.js';
import { createOrg, createUser, type TestUser } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { usingPostgres } from '../support/env.js';
import { createConnection } from '../modules/vpn/vpn-helpers.js';

/**
 * The lists' totals come from counts kept by triggers (migration 30, list_counts; docs/api-conventions.md, "Lists"): exact under
 * concurrent writes through the API and after SQL written outside the application, for every filter combination;
 * `starting_after` on the page lists (server/db/raw-page.ts).
 */
describe(`list totals from maintained counts, and starting_after on page lists (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(120_000);
  let s: TestServer;
  let owner: TestUser;
  let member: TestUser;
  let serverId: string;

  const sql = <T extends object>(text: string, params: unknown[] = []) =>
    s.deps.db.orm.em.fork().execute<T[]>(text, params);

  const list = (token: string, query: string) =>
    http(s.baseUrl, 'GET', `/v1/vpn/connections?${query}`, { token });

  /** Every filter combination's total, from the API, beside the rows counted in the table. */
  async function assertExactTotals(): Promise<void> {
    const filters: Record<string, string>[] = [{}];
    for (const [key, values] of [
      ['status', CONNECTION_STATUSES],
      ['protocol', VPN_PROTOCOLS],
      ['location', ['eu-central', 'us-east']],
    ] as const) {
      for (const f of [...filters]) for (const v of values) filters.push({ ...f, [key]: v });
    }
    for (const f of filters) {
      for (const [who, user] of [
        ['all', undefined],
        [owner.id, owner.id],
        [member.id, member.id],
      ] as const) {
        const conds = [`organization_id = ?`, ...Object.keys(f).map((k) => `"${k}" = ?`)];
        const params: unknown[] = [owner.organizationId, ...Object.values(f)];
        if (user) {
          conds.push('user_id = ?');
          params.push(user);
        }
        const count = async () =>
          Number(
            (
              await sql<{ n: string }>(
                `select count(*) as n from vpn_connections where ${conds.join(' and ')}`,
                params,
              )
            )[0]!.n,
          );
        // Activation jobs move connections on meanwhile: compare when the rows did not change around the request.
        for (let attempt = 0; ; attempt++) {
          const before = await count();
          const res = await list(
            owner.token,
            new URLSearchParams({ ...f, user_id: who, limit: '1' }).toString(),
          );
          expect(res.status).to.equal(200);
          if ((await count()) !== before && attempt < 50) continue;
          expect(res.body.total, `${who} ${JSON.stringify(f)}`).to.equal(before);
          break;
        }
      }
    }
  }

  before(async () => {
    s = await sharedServer();
    owner = await createOrg(s.deps, { plan: 'enterprise' });
    member = await createUser(s.deps, owner.organizationId, { permissions: ['vpn:write'] });
    const [server] = await sql<{ id: string }>(
      `select id from vpn_servers where location = 'eu-central' and status = 'online' limit 1`,
    );
    serverId = server!.id;
  });

  it('keeps totals exact under concurrent creates and deletes through the API, for every filter', async () => {
    const created = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        createConnection(s.baseUrl, i % 3 === 0 ? member.token : owner.token, {
          name: `c${i}`,
          protocol: i % 2 ? 'openvpn' : 'wireguard',
          location: 'eu-central',
        }),
      ),
    );
    for (const c of created) expect(c.status, JSON.stringify(c.body)).to.equal(201);
    // The compaction job folding shards meanwhile changes no total.
    const compactions = Array.from({ length: 4 }, () => compactListCounts(s.deps.db.orm.em.fork()));
    await Promise.all([
      ...created
        .slice(0, 5)
        .map((c) =>
          http(s.baseUrl, 'DELETE', `/v1/vpn/connections/${c.body.connection.id}`, { token: owner.token }),
        ),
      ...compactions,
    ]);
    await assertExactTotals();
    await compactListCounts(s.deps.db.orm.em.fork());
    await assertExactTotals();
  });

  it('keeps totals exact after rows written by SQL outside the application (bulk insert, update, delete)', async () => {
    await sql(
      `insert into vpn_connections (id, created_at, updated_at, organization_id, user_id, server_id, name, location, protocol, status)
       select 'vpn_bulk' || g || '_' || md5(random()::text), now() - g * interval '1 second', now(), ?, ?, ?, 'bulk',
              case when g % 2 = 0 then 'eu-central' else 'us-east' end,
              case when g % 3 = 0 then 'openvpn' else 'wireguard' end,
              (array['connecting','active','inactive','error'])[1 + g % 4]
         from generate_series(1, 300) g`,
      [owner.organizationId, member.id, serverId],
    );
    await assertExactTotals();
    await sql(
      `update vpn_connections set status = 'error', user_id = ? where organization_id = ? and name = 'bulk' and location = 'us-east'`,
      [owner.id, owner.organizationId],
    );
    await sql(`update vpn_connections set upload_bytes = upload_bytes + 1 where organization_id = ?`, [
      owner.organizationId,
    ]);
    await sql(
      `delete from vpn_connections where organization_id = ? and name = 'bulk' and protocol = 'openvpn'`,
      [owner.organizationId],
    );
    await assertExactTotals();
    // Another organization's rows change nothing here.
    const other = await createOrg(s.deps, { plan: 'enterprise' });
    await createConnection(s.baseUrl, other.token);
    await assertExactTotals();
    const theirs = await list(other.token, 'limit=5');
    expect(theirs.body.total).to.equal(1);
  });

  it('empties the counts with the table on TRUNCATE (rolled back here)', async () => {
    const em = s.deps.db.orm.em.fork();
    await em
      .transactional(async (tx) => {
        await tx.execute('truncate vpn_connections');
        const [row] = await tx.execute<{ n: string }[]>(
          `select count(*) as n from list_counts where list = 'vpn_connections'`,
        );
        expect(Number(row!.n)).to.equal(0);
        throw new Error('rollback');
      })
      .catch((err: Error) => expect(err.message).to.equal('rollback'));
    await assertExactTotals();
  });

  it('walks every row exactly once with starting_after while rows are inserted between pages', async () => {
    const [{ n }] = (await sql<{ n: string }>(
      `select count(*) as n from vpn_connections where organization_id = ? and location = 'eu-central'`,
      [owner.organizationId],
    )) as [{ n: string }];
    const seen: string[] = [];
    let after: string | undefined;
    let inserted = 0;
    for (;;) {
      const res = await list(
        owner.token,
        `user_id=all&location=eu-central&limit=7${after ? `&starting_after=${after}` : ''}`,
      );
      expect(res.status).to.equal(200);
      expect(res.body.page).to.equal(after ? null : 1);
      expect(res.body.limit).to.equal(7);
      seen.push(...res.body.connections.map((c: { id: string }) => c.id));
      if (!res.body.has_more) break;
      after = res.body.connections.at(-1).id;
      if (inserted++ < 3) {
        const c = await createConnection(s.baseUrl, owner.token, { name: `between${inserted}` });
        expect(c.status).to.equal(201);
      }
    }
    expect(seen.length).to.equal(Number(n));
    expect(new Set(seen).size).to.equal(seen.length);
    // Same order as the page list.
    const pages = await list(owner.token, `user_id=all&location=eu-central&limit=100`);
    const newest = pages.body.connections.map((c: { id: string }) => c.id);
    expect(newest.slice(3, 3 + 20)).to.deep.equal(seen.slice(0, 20));
  });

  it('refuses an unknown id, another organization’s, one outside the filters, and page with starting_after', async () => {
    const other = await createOrg(s.deps, { plan: 'enterprise' });
    const theirs = await createConnection(s.baseUrl, other.token);
    const mine = await list(owner.token, 'user_id=all&protocol=wireguard&limit=1');
    const wireguard = mine.body.connections[0].id as string;
    for (const query of [
      'starting_after=vpn_doesnotexist',
      `starting_after=${theirs.body.connection.id}`,
      `user_id=all&protocol=openvpn&starting_after=${wireguard}`,
      `user_id=all&page=1&starting_after=${wireguard}`,
    ]) {
      const res = await list(owner.token, query);
      expect(res.status, query).to.equal(400);
      expect(res.body.error.code, query).to.equal('VALIDATION_ERROR');
    }
    // The member's list is their own: the owner's connection is not an item of it.
    const res = await list(member.token, `starting_after=${wireguard}`);
    expect(res.status).to.equal(400);
  });

  it('pages other lists with starting_after and exact totals (users, API keys)', async () => {
    for (let i = 0; i < 3; i++) await createUser(s.deps, owner.organizationId, { role: 'admin' });
    const first = await http(s.baseUrl, 'GET', '/v1/users?limit=2', { token: owner.token });
    const next = await http(s.baseUrl, 'GET', `/v1/users?limit=2&starting_after=${first.body.users[1].id}`, {
      token: owner.token,
    });
    const page2 = await http(s.baseUrl, 'GET', '/v1/users?limit=2&page=2', { token: owner.token });
    expect(next.body.users).to.deep.equal(page2.body.users);
    expect(next.body.total).to.equal(5);
    expect(next.body.page).to.equal(null);
    const admins = await http(s.baseUrl, 'GET', '/v1/users?role=admin', { token: owner.token });
    expect(admins.body.total).to.equal(3);
    await sql(`update users set deleted_at = now() where id = ?`, [admins.body.users[0].id]);
    const after = await http(s.baseUrl, 'GET', '/v1/users?role=admin', { token: owner.token });
    expect(after.body.total).to.equal(2);
    expect(after.body.has_more).to.equal(false);
  });

  it('keeps the audit log total exact under concurrent writes and SQL, and counts its rows with uncounted filters', async () => {
    const org = await createOrg(s.deps, { plan: 'enterprise' });
    const audit = (query = '') =>
      http(s.baseUrl, 'GET', `/v1/audit-logs?limit=1${query}`, { token: org.token });
    const counted = async (where = '') =>
      Number(
        (
          await sql<{ n: string }>(`select count(*) as n from audit_logs where organization_id = ?${where}`, [
            org.organizationId,
          ])
        )[0]!.n,
      );
    await Promise.all(
      Array.from({ length: 8 }, (_, i) => createConnection(s.baseUrl, org.token, { name: `a${i}` })),
    );
    await sql(
      `insert into audit_logs (id, created_at, organization_id, actor_type, actor_id, action, status)
       select 'aud_bulk' || g || '_' || md5(random()::text), now(), ?, 'user', ?, 'imported.entry', 200
         from generate_series(1, 50) g`,
      [org.organizationId, org.id],
    );
    expect((await audit()).body.total).to.equal(await counted());
    expect((await audit('&action=imported.entry')).body.total).to.equal(50);
    expect((await audit('&action=vpn.connections.create')).body.total).to.equal(
      await counted(` and action = 'vpn.connections.create'`),
    );
    await sql(
      `delete from audit_logs where organization_id = ? and action = 'imported.entry' and id like 'aud_bulk1%'`,
      [org.organizationId],
    );
    expect((await audit()).body.total).to.equal(await counted());
    expect((await audit(`&actor_id=${org.id}`)).body.total).to.equal(
      await counted(` and actor_id = '${org.id}'`),
    );
  });

  it('lets two transactions of one organization write rows of the same counts without waiting on each other (PostgreSQL)', async function () {
    // PGlite has one connection: nothing runs concurrently there.
    if (!usingPostgres) this.skip();
    const clients: pg.Client[] = [];
    try {
      // Two backends whose pids fall in different shards (migration 20261127000020: pid modulo 16).
      const byShard = new Map<number, pg.Client>();
      while (byShard.size < 2 && clients.length < 40) {
        const c = new pg.Client({ connectionString: process.env.DATABASE_URL });
        await c.connect();
        clients.push(c);
        const { rows } = await c.query<{ pid: number }>('select pg_backend_pid() as pid');
        byShard.set(rows[0]!.pid % 16, c);
      }
      const [a, b] = [...byShard.values()];
      const insert = (c: pg.Client, i: number) =>
        c.query(
          `insert into vpn_connections (id, created_at, updated_at, organization_id, user_id, server_id, name, location, protocol, status)
           values ($1, now(), now(), $2, $3, $4, 'same-key', 'eu-central', 'wireguard', 'active')`,
          [`vpn_shard${i}_${Date.now()}`, owner.organizationId, owner.id, serverId],
        );
      for (const c of [a!, b!]) await c.query(`begin; set local lock_timeout = '2s'`);
      await insert(a!, 1);
      // Migration 30 kept one row per key: this insert waited for the first transaction's commit (here: lock_timeout).
      await insert(b!, 2);
      await b!.query('commit');
      await a!.query('commit');
      // Two shards of one key; folding them keeps every total, and leaves one row per key.
      await assertExactTotals();
      const shards = () =>
        sql<{ keys: number; rows: number }>(
          `select count(distinct (owner_id, d1, d2, d3))::int as keys, count(*)::int as rows from list_counts
            where list = 'vpn_connections' and scope_id = ?`,
          [owner.organizationId],
        );
      expect((await shards())[0]!.rows).to.be.greaterThan((await shards())[0]!.keys);
      expect(await compactListCounts(s.deps.db.orm.em.fork())).to.be.greaterThan(0);
      const [after] = await shards();
      expect(after!.rows).to.equal(after!.keys);
      await assertExactTotals();
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  });

  it('removes the count rows that reach 0', async () => {
    const org = await createOrg(s.deps, { plan: 'enterprise' });
    const made = await Promise.all(
      [0, 1, 2].map((i) => createConnection(s.baseUrl, org.token, { name: `z${i}` })),
    );
    const rows = () =>
      sql<{ n: string }>(
        `select count(*) as n from list_counts where list = 'vpn_connections' and scope_id = ?`,
        [org.organizationId],
      );
    expect(Number((await rows())[0]!.n)).to.be.greaterThan(0);
    for (const c of made) {
      const res = await http(s.baseUrl, 'DELETE', `/v1/vpn/connections/${c.body.connection.id}`, {
        token: org.token,
      });
      expect(res.status).to.equal(200);
    }
    // Rows emptied by the connection that wrote them go at once; shards left at +n and −n by different connections
    // (PostgreSQL's pool) go when the compaction job folds them.
    await compactListCounts(s.deps.db.orm.em.fork());
    expect(Number((await rows())[0]!.n)).to.equal(0);
    expect((await list(org.token, 'limit=5')).body).to.include({ total: 0, has_more: false });
  });
});
