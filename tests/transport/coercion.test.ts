// Test tier: server
import { expect } from 'chai';
import { createOrg } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';

// JSON bodies mean exactly their JSON types, on /v1 and /trpc alike: a REST layer that coerced input fields
// ("false" → true) would also change /trpc, since both share the schema objects.
describe('input coercion', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  it('refuses a string where a JSON body expects a boolean, over REST and in-process, and creates nothing', async () => {
    const owner = await createOrg(s.deps);
    const body = { url: 'https://hooks.example.com/x', events: ['user.created'], active: 'false' };
    const rest = await http(s.baseUrl, 'POST', '/v1/webhooks', { token: owner.token, body });
    expect(rest.status).to.equal(400);
    expect(rest.body.error.code).to.equal('VALIDATION_ERROR');
    expect(rest.body.error.details).to.deep.include({
      path: 'active',
      message: rest.body.error.details[0].message,
    });
    expect(rest.body.error.details.map((d: { path: string }) => d.path)).to.include('active');

    let inProcess: unknown;
    try {
      await s.caller(owner.token).webhooks.create(body as never);
    } catch (err) {
      inProcess = err;
    }
    expect(inProcess, 'in-process call must fail as well').to.be.instanceOf(Error);

    const list = await http(s.baseUrl, 'GET', '/v1/webhooks', { token: owner.token });
    expect(list.status).to.equal(200);
    expect(list.body.total).to.equal(0);
  });

  it('still reads declared numeric query parameters from strings', async () => {
    const owner = await createOrg(s.deps);
    const res = await http(s.baseUrl, 'GET', '/v1/users?page=1&limit=5', { token: owner.token });
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ page: 1, limit: 5 });
  });
});
