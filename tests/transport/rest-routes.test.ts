// Test tier: server
import { expect } from 'chai';
import { buildOpenApiDocument } from '../../server/openapi.js';
import { restRoutes } from '../../server/rest.js';
import { appRouter } from '../../server/router.js';
import { createOrg, createUser } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';

// The /v1 routes are made from the same procedure metadata as the OpenAPI document: every documented operation is
// served at its path and method, and nothing else is.
describe('REST routes (/v1)', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  it('serves exactly the operations of the OpenAPI document', () => {
    const documented = Object.entries(buildOpenApiDocument().paths ?? {})
      .filter(([path]) => path !== '/openapi.json')
      .flatMap(([path, item]) =>
        Object.keys(item as object)
          .filter((k) => ['get', 'post', 'put', 'patch', 'delete'].includes(k))
          .map((m) => `${m.toUpperCase()} ${path}`),
      );
    const served = restRoutes(appRouter).map((r) => `${r.method} ${r.openapiPath}`);
    expect(served.length).to.be.greaterThan(20);
    expect(new Set(served).size, 'one procedure per method and path').to.equal(served.length);
    expect([...served].sort()).to.deep.equal([...documented].sort());
  });

  it('refuses a body that names a path parameter, and changes nothing', async () => {
    const owner = await createOrg(s.deps);
    const target = await createUser(s.deps, owner.organizationId);
    const other = await createUser(s.deps, owner.organizationId);
    const res = await http(s.baseUrl, 'PUT', `/v1/users/${target.id}`, {
      token: owner.token,
      body: { id: other.id, name: 'Renamed' },
    });
    expect(res.status, res.text).to.equal(400);
    expect(res.body.error.code).to.equal('VALIDATION_ERROR');
    expect(res.body.error.details).to.deep.equal([
      { path: 'id', message: 'Unknown field (it is part of the path)' },
    ]);
    for (const u of [target, other]) {
      const got = await http(s.baseUrl, 'GET', `/v1/users/${u.id}`, { token: owner.token });
      expect(got.body.user.name, u.id).to.not.equal('Renamed');
    }
  });

  it('treats a query parameter with an empty value as absent, and validates a repeated one', async () => {
    const owner = await createOrg(s.deps);
    const empty = await http(s.baseUrl, 'GET', '/v1/users?status=&page=', { token: owner.token });
    expect(empty.status, empty.text).to.equal(200);
    expect(empty.body).to.include({ page: 1, total: 1 });
    const repeated = await http(s.baseUrl, 'GET', '/v1/users?status=active&status=invited', {
      token: owner.token,
    });
    expect(repeated.status, repeated.text).to.equal(400);
    expect(repeated.body.error.code).to.equal('VALIDATION_ERROR');
  });

  it('decodes percent-encoded path parameters', async () => {
    const owner = await createOrg(s.deps);
    const encoded = owner.id.replace('_', '%5F');
    const res = await http(s.baseUrl, 'GET', `/v1/users/${encoded}`, { token: owner.token });
    expect(res.status, res.text).to.equal(200);
    expect(res.body.user.id).to.equal(owner.id);
  });
});
