// Test tier: server
import { expect } from 'chai';
import { appRouter } from '../../server/router.js';
import { createInProcessContext } from '../../server/trpc/context.js';
import { takesIdempotencyKey } from '../../server/trpc/idempotency.js';
import { createCallerFactory } from '../../server/trpc/init.js';
import { auditFixtures } from '../audit/audit-fixtures.js';
import { createOrg } from '../support/factories.js';
import { FakeClock } from '../support/fake-clock.js';
import { listProcedures } from '../support/security-table.js';
import { startTestServer, type TestServer } from '../support/server.js';

const createCaller = createCallerFactory(appRouter);

/**
 * Every operation that takes an `Idempotency-Key` (docs/api-conventions.md, "Idempotency"), called the way a user succeeds with it
 * (the audit table's fixtures) and then again with the same key: the second call is the first answer replayed, and
 * nothing ran twice (one audit entry). On the embedded database this also shows that no operation needs a second
 * connection while the transaction that keeps its answer is open (it would wait for ever).
 */
describe('Idempotency-Key on every operation that takes one', function () {
  this.timeout(120_000);
  let s: TestServer;
  const clock = new FakeClock('2026-11-24T09:00:00.000Z');
  before(async () => {
    s = await startTestServer({ clock });
  });
  after(async () => {
    await s?.close();
  });

  const idempotent = listProcedures().filter((p) => p.type === 'mutation' && takesIdempotencyKey(p.meta));
  // Logging out revokes the token that would send the repeat: that repeat is 401, as any call with it. Handing
  // ownership over takes the owner role the repeat needs: that repeat is 403, as any owner-only call of the caller.
  const REPEAT_IMPOSSIBLE = new Set(['auth.logout', 'organization.transferOwnership']);

  it('covers the authenticated POSTs and the subscription change', () => {
    const rest = idempotent.map((p) => `${p.rest!.method} ${p.rest!.path}`);
    expect(rest).to.include.members(['POST /vpn/connections', 'PUT /billing/subscription', 'POST /api-keys']);
    expect(rest.every((r) => r.startsWith('POST ') || r === 'PUT /billing/subscription')).to.equal(true);
  });

  for (const p of idempotent.filter((q) => !REPEAT_IMPOSSIBLE.has(q.path))) {
    it(`${p.path}: the repeat is the first answer, and runs nothing`, async function () {
      const fixture = auditFixtures[p.path];
      expect(fixture, `${p.path} needs an audit fixture`).to.be.a('function');
      const owner = await createOrg(s.deps, { plan: 'enterprise' });
      const prepared = await fixture!({ s, owner, clock });
      const key = `every-post-${p.path}`;
      const caller = () =>
        createCaller(createInProcessContext(s.deps, { token: prepared.token, idempotencyKey: key }));
      const call = (c: ReturnType<typeof caller>) =>
        (
          p.path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], c) as (
            i: unknown,
          ) => Promise<unknown>
        )(prepared.input);

      const first = await call(caller());
      const second = await call(caller());
      expect(second, 'the replayed answer').to.deep.equal(first);
      const [row] = await s.deps.db.orm.em
        .fork()
        .execute<{ n: string | number }[]>(
          'select count(*) as n from audit_logs where organization_id = ? and action = ?',
          [owner.organizationId, p.path],
        );
      expect(Number(row!.n), 'audit entries').to.equal(1);
    });
  }
});
