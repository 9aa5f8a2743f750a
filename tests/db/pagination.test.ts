// Test tier: server
import { expect } from 'chai';
import { z } from 'zod';
import { User } from '../../server/access/user.entity.js';
import { findCursorPage, findPage } from '../../server/db/pagination.js';
import { pageQueryShape, pageRequest, ZCursorQuery, ZPageQuery } from '../../server/lib/pagination.js';
import { AppError } from '../../server/lib/errors.js';
import { createOrg, createUser } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';

describe('pagination helpers (server/lib/pagination.ts, server/db/pagination.ts)', () => {
  it('defaults to page 1, limit 20 and coerces query strings', () => {
    expect(ZPageQuery.parse({})).to.deep.equal({ limit: 20 });
    expect(pageRequest(ZPageQuery.parse({}))).to.deep.equal({ page: 1, limit: 20, startingAfter: undefined });
    expect(ZPageQuery.parse({ page: '3', limit: '100' })).to.deep.equal({ page: 3, limit: 100 });
    expect(ZCursorQuery.parse({ limit: '5', starting_after: 'usr_x' })).to.deep.equal({
      limit: 5,
      starting_after: 'usr_x',
    });
  });

  it('refuses out-of-range and non-integer values', () => {
    for (const bad of [
      { page: '0' },
      { page: '-1' },
      { page: '1.5' },
      { page: 'abc' },
      { page: '' },
      { limit: '0' },
      { limit: '101' },
      { limit: 'ten' },
    ]) {
      expect(ZPageQuery.safeParse(bad).success, JSON.stringify(bad)).to.equal(false);
    }
  });

  it('ignores unknown query parameters when spread into a plain object', () => {
    const q = z.object({ ...pageQueryShape, status: z.string().optional() });
    expect(q.parse({ page: '2', other: 'x' })).to.deep.equal({ page: 2, limit: 20 });
  });

  it('takes a page or starting_after, not both', () => {
    expect(pageRequest(ZPageQuery.parse({ starting_after: 'vpn_x', limit: '5' }))).to.deep.equal({
      page: 1,
      limit: 5,
      startingAfter: 'vpn_x',
    });
    expect(() => pageRequest(ZPageQuery.parse({ page: '1', starting_after: 'vpn_x' })))
      .to.throw(AppError)
      .with.property('code', 'VALIDATION_ERROR');
  });

  describe('queries', () => {
    let s: TestServer;
    let orgId: string;
    let ids: string[];
    before(async () => {
      s = await sharedServer();
      const owner = await createOrg(s.deps);
      orgId = owner.organizationId;
      ids = [owner.id];
      for (let i = 0; i < 4; i++) ids.push((await createUser(s.deps, orgId)).id);
    });

    it('pages newest first with the total', async () => {
      const em = s.deps.db.orm.em.fork();
      const p1 = await findPage(em, User, { organization: orgId }, { page: 1, limit: 2 });
      const p3 = await findPage(em, User, { organization: orgId }, { page: 3, limit: 2 });
      expect(p1.total).to.equal(5);
      expect(p1.items.map((u) => u.id)).to.deep.equal([ids[4], ids[3]]);
      expect(p3.items.map((u) => u.id)).to.deep.equal([ids[0]]);
    });

    it('walks a cursor list to its end and refuses a foreign cursor', async () => {
      const em = s.deps.db.orm.em.fork();
      const seen: string[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await findCursorPage(
          em,
          User,
          { organization: orgId },
          { limit: 2, starting_after: after },
        );
        expect(page.total).to.equal(5);
        seen.push(...page.items.map((u) => u.id));
        if (!page.has_more) break;
        after = page.items.at(-1)!.id;
      }
      expect(seen).to.deep.equal([...ids].reverse());
      const other = await createOrg(s.deps);
      try {
        await findCursorPage(em, User, { organization: orgId }, { limit: 2, starting_after: other.id });
        expect.fail('expected a validation error');
      } catch (err) {
        expect(err).to.be.instanceOf(AppError);
        expect((err as AppError).code).to.equal('VALIDATION_ERROR');
      }
    });
  });
});
