// Test tier: server
import { expect } from 'chai';
import { apiCallsSince, apiUsageSince } from '../../server/limits/api-usage.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { createOrg, createUser } from '../support/factories.js';

describe('API call counting', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  it('counts every authenticated request per organization and user, before and after the flush', async () => {
    const owner = await createOrg(s.deps);
    const member = await createUser(s.deps, owner.organizationId);
    const since = new Date(s.deps.clock.now().getTime() - 30 * 86_400_000);
    for (let i = 0; i < 3; i++) await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token });
    await s.caller(member.token).auth.me();
    const em = s.deps.db.orm.em.fork();
    expect(await apiCallsSince(em, { organizationId: owner.organizationId, since })).to.equal(4);
    expect(
      await apiCallsSince(em, { organizationId: owner.organizationId, userId: member.id, since }),
    ).to.equal(1);

    await s.deps.apiUsage.flush();
    const rows = await em.execute<{ user_id: string; count: number }[]>(
      'select user_id, "count" from api_calls_daily where organization_id = ? order by "count" desc',
      [owner.organizationId],
    );
    expect(rows.map((r) => [r.user_id, Number(r.count)])).to.deep.equal([
      [owner.id, 3],
      [member.id, 1],
    ]);
    expect(await apiCallsSince(em, { organizationId: owner.organizationId, since })).to.equal(4);

    // Unauthenticated and refused requests are not API calls.
    await http(s.baseUrl, 'GET', '/v1/auth/me', { token: 'nope' });
    await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token });
    const usage = await apiUsageSince(em, { organizationId: owner.organizationId, since });
    expect(usage).to.deep.equal({ calls: 5, rateLimited: 0 });
  });

  it('keeps the counts in memory when a write fails, and writes them once later', async () => {
    const owner = await createOrg(s.deps);
    const since = new Date(s.deps.clock.now().getTime() - 86_400_000);
    const usage = s.deps.apiUsage as unknown as { write: (part: unknown[]) => Promise<void> };
    const write = usage.write;
    await s.deps.apiUsage.flush();
    for (let i = 0; i < 2; i++) await s.caller(owner.token).auth.me();
    usage.write = async () => {
      throw new Error('database went away');
    };
    try {
      await s.deps.apiUsage.flush();
    } finally {
      usage.write = write;
    }
    const em = s.deps.db.orm.em.fork();
    expect(await apiCallsSince(em, { organizationId: owner.organizationId, since })).to.equal(2);
    await s.deps.apiUsage.flush();
    const rows = await em.execute<{ count: number }[]>(
      'select "count" from api_calls_daily where organization_id = ?',
      [owner.organizationId],
    );
    expect(rows.map((r) => Number(r.count))).to.deep.equal([2]);
    expect(await apiCallsSince(em, { organizationId: owner.organizationId, since })).to.equal(2);
  });
});
