// Test tier: server
import { expect } from 'chai';
import { toAppError } from '../../../server/trpc/init.js';
import { createOrg, createUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { listProcedures } from '../../support/security-table.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { hostingSecurityFixtures } from './hosting.security-fixtures.js';

const ALL_HOSTING = ['hosting:read', 'hosting:write', 'hosting:delete'] as const;

/**
 * The security table checks every procedure across organizations; sites are also owned by their creator, so a
 * member holding every hosting permission gets 404 for another member's site and its deployments, in process
 * and over HTTP. The fixtures are the table's own, with `other` a member of the same organization.
 */
describe('Hosting across members of one organization', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  const procedures = listProcedures().filter((p) => p.path.startsWith('hosting.') && p.rest?.params.length);

  it('has a fixture for every hosting procedure that takes an id', () => {
    expect(procedures.map((p) => p.path).sort()).to.deep.equal(Object.keys(hostingSecurityFixtures).sort());
  });

  for (const p of procedures) {
    it(`${p.path}: another member's resource is 404`, async () => {
      const owner = await createOrg(s.deps);
      const author = await createUser(s.deps, owner.organizationId, { permissions: [...ALL_HOSTING] });
      const stranger = await createUser(s.deps, owner.organizationId, { permissions: [...ALL_HOSTING] });
      const input = (await hostingSecurityFixtures[p.path]!({ s, other: author })) as Record<string, unknown>;

      const fn = p.path
        .split('.')
        .reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], s.caller(stranger.token)) as (
        i: unknown,
      ) => Promise<unknown>;
      const err = await fn(input).then(
        () => undefined,
        (e: unknown) => toAppError(e),
      );
      expect(err?.code, `${p.path} in process`).to.equal('NOT_FOUND');

      const fields = { ...input };
      let url = p.rest!.path;
      for (const param of p.rest!.params) {
        url = url.replace(`{${param}}`, String(fields[param]));
        delete fields[param];
      }
      const hasBody = !['GET', 'DELETE'].includes(p.rest!.method);
      const query = hasBody ? '' : `?${new URLSearchParams(fields as Record<string, string>)}`;
      const res = await http(s.baseUrl, p.rest!.method, `/v1${url}${query}`, {
        token: stranger.token,
        ...(hasBody ? { body: fields } : {}),
      });
      expect(res.status, `${p.rest!.method} ${url}: ${res.text}`).to.equal(404);
      expect(res.body.error.code).to.equal('NOT_FOUND');
    });
  }
});
