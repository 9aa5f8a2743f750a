// Test tier: server
import type { AnyTRPCProcedure } from '@trpc/server';
import { expect } from 'chai';
import { appRouter } from '../../server/router.js';
import type { Meta } from '../../server/trpc/init.js';
import { createOrg } from '../support/factories.js';
import { http } from '../support/http.js';
import { IDP_CERT } from '../support/idp-certificate.js';
import { sharedServer, type TestServer } from '../support/server.js';

// Conventions §1: unknown query parameters are ignored. Checked on every GET and DELETE operation of the router,
// so an operation added later is covered too. An id in the path is one that does not exist: 404, never 400.
describe('unknown query parameters', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  // A DELETE that reads a JSON body (`DELETE /organization`, meta `deleteWithBody`) is checked by its own test with
  // its body (tests/modules/organization/organization.http.test.ts).
  const operations = Object.values(appRouter._def.procedures as unknown as Record<string, AnyTRPCProcedure>)
    .map((p) => p._def.meta as Meta | undefined)
    .filter((m) => !m?.deleteWithBody)
    .map((m) => m?.openapi)
    .filter((o): o is NonNullable<Meta['openapi']> =>
      Boolean(o && (o.method === 'GET' || o.method === 'DELETE')),
    );

  it('covers at least one operation', () => {
    expect(operations.length).to.be.greaterThan(3);
  });

  it('are ignored by every GET and DELETE operation', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    // Singletons that exist once made: the single sign-on connection (SAML by its three fields: nothing fetched).
    const sso = await http(s.baseUrl, 'PUT', '/v1/organization/sso', {
      token: owner.token,
      body: {
        protocol: 'saml',
        idp_entity_id: 'https://idp.example.test/saml',
        idp_sso_url: 'https://idp.example.test/sso',
        idp_certificate: IDP_CERT,
      },
    });
    expect(sso.status, sso.text).to.equal(200);
    for (const op of operations) {
      const path = op.path.replace(/\{[^}]+\}/g, 'zz_unknown00000000000000');
      const res = await http(s.baseUrl, op.method, `/v1${path}?utm_source=newsletter&x=1`, {
        token: owner.token,
      });
      expect(res.status, `${op.method} ${op.path}: ${res.text}`).to.be.oneOf(
        op.path.includes('{') ? [404] : [200],
      );
    }
  });
});
