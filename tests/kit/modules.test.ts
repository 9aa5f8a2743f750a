// Test tier: server
import { expect } from 'chai';
import { EVENT_TYPES } from '../../server/events/event-types.js';
import { buildRegistry } from '../../server/kit/registry.js';
import { modules } from '../../server/modules.js';
import { appRouter } from '../../server/router.js';
import { sharedServer } from '../support/server.js';

describe('module manifests (docs/adding-a-module.md)', () => {
  const registry = buildRegistry(modules);

  it('every module with a router is routed under its name in server/router.ts (its further routers under theirs), and nothing else is', () => {
    const routed = appRouter._def.record as Record<string, unknown>;
    const withRouter = modules.filter((m) => m.router);
    for (const m of withRouter)
      expect(routed[m.name], `module ${m.name}`).to.deep.equal(m.router!._def.record);
    const further = modules.flatMap((m) => Object.entries(m.routers ?? {}));
    for (const [key, r] of further) expect(routed[key], `router ${key}`).to.deep.equal(r._def.record);
    expect(Object.keys(routed).sort()).to.deep.equal(
      [...withRouter.map((m) => m.name), ...further.map(([key]) => key)].sort(),
    );
  });

  it('every event of the catalogue is declared by exactly one module (with its payload schema)', () => {
    const declared = modules.flatMap((m) => (m.events ?? []).map((e) => e.type));
    expect(new Set(declared).size, 'an event declared twice').to.equal(declared.length);
    const missing = EVENT_TYPES.filter((t) => !declared.includes(t));
    expect(missing, 'events of the catalogue that no module declares').to.deep.equal([]);
  });

  it("every job and worker is named after its module (`<module>.<what>`; the core's are events.*)", () => {
    for (const m of modules) {
      const prefixes = m.name === 'core' ? ['events.', 'core.'] : [`${m.name}.`];
      for (const item of [...(m.jobs ?? []), ...(m.workers ?? [])]) {
        expect(
          prefixes.some((p) => item.name.startsWith(p)),
          `${item.name} of module ${m.name}`,
        ).to.equal(true);
      }
    }
  });

  it('every job has a payload schema, checked at send and at run (docs/jobs.md, "What the queue layer adds")', () => {
    const without = registry.jobs.filter((j) => !j.payload).map((j) => j.name);
    expect(without).to.deep.equal([]);
  });

  it('names are unique across modules: a second declaration stops the start', () => {
    const [first] = registry.jobs;
    expect(() => buildRegistry([...modules, { name: 'copy', jobs: [first!] }])).to.throw(/declared twice/);
    expect(() => buildRegistry([...modules, { name: 'vpn' }])).to.throw(/module vpn is declared twice/);
  });

  it('every entity that references a user is an owned resource or says why not', async () => {
    const s = await sharedServer();
    const owned = new Set(s.deps.registry.ownedResources.list().map((r) => r.table));
    const exempt = new Set(modules.flatMap((m) => Object.keys(m.notOwnedByUser ?? {})));
    const unaccounted: string[] = [];
    for (const meta of s.deps.db.orm.getMetadata().getAll().values()) {
      if (meta.abstract || meta.className === 'User') continue;
      const refersToUser = Object.values(meta.properties).some(
        (p) => (p.kind === 'm:1' || p.kind === '1:1') && p.type === 'User',
      );
      if (refersToUser && !owned.has(meta.tableName) && !exempt.has(meta.className)) {
        unaccounted.push(`${meta.className} (${meta.tableName})`);
      }
    }
    expect(unaccounted, 'declare them in `ownedResources` or `notOwnedByUser` of their module').to.deep.equal(
      [],
    );
    for (const name of exempt) {
      expect(
        [...s.deps.db.orm.getMetadata().getAll().values()].some((m) => m.className === name),
        `notOwnedByUser names ${name}, which is no entity`,
      ).to.equal(true);
    }
  });

  it('every owned resource table exists and has the owner and organization columns it names', async () => {
    const s = await sharedServer();
    const em = s.deps.db.orm.em.fork();
    for (const r of s.deps.registry.ownedResources.list()) {
      const cols = await em.execute<{ column_name: string }[]>(
        `select column_name from information_schema.columns where table_schema = 'public' and table_name = ?`,
        [r.table],
      );
      const names = cols.map((c) => c.column_name);
      expect(names, r.table).to.include.members([
        r.ownerColumn ?? 'user_id',
        r.organizationColumn ?? 'organization_id',
      ]);
    }
  });

  it("every table of the application says how a deleted organization's rows leave it (manifest organizationRows)", async () => {
    const s = await sharedServer();
    const em = s.deps.db.orm.em.fork();
    const tables = (
      await em.execute<{ table_name: string }[]>(
        `select table_name from information_schema.tables
          where table_schema = 'public' and table_type = 'BASE TABLE' and table_name not like 'mikro_orm%'`,
      )
    ).map((t) => t.table_name);
    const removed = new Map<string, string>();
    const kept = new Map<string, string>();
    for (const m of modules) {
      for (const step of m.organizationRows?.remove ?? []) {
        expect(removed.has(step.table), `${step.table} is removed by two modules`).to.equal(false);
        removed.set(step.table, m.name);
      }
      for (const table of Object.keys(m.organizationRows?.keep ?? {})) kept.set(table, m.name);
    }
    for (const table of tables) {
      expect(
        removed.has(table) || kept.has(table),
        `table ${table}: add it to its module's organizationRows (remove, or keep with the reason)`,
      ).to.equal(true);
    }
    for (const table of [...removed.keys(), ...kept.keys()]) expect(tables, table).to.include(table);
    // Every table with an organization column is removed, not kept.
    const withOrg = await em.execute<{ table_name: string }[]>(
      `select table_name from information_schema.columns where table_schema = 'public' and column_name = 'organization_id'`,
    );
    for (const { table_name } of withOrg) expect(removed.has(table_name), table_name).to.equal(true);
    // The organization's own row goes last.
    const steps = modules.flatMap((m) => m.organizationRows?.remove ?? []);
    expect(steps.at(-1)?.table).to.equal('organizations');
  });
});
