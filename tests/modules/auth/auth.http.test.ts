// Test tier: server
import { expect } from 'chai';
import { http } from '../../support/http.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { createOrg } from '../../support/factories.js';

describe('auth over HTTP', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  it('logs in and returns the token pair and user', async () => {
    const owner = await createOrg(s.deps);
    const res = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email: owner.email, password: owner.password },
    });
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ success: true, token_type: 'Bearer', expires_in: 3600 });
    expect(res.body.refresh_token).to.match(/^rt_/);
    expect(res.body.user).to.include({ id: owner.id, email: owner.email, role: 'owner' });
    expect(res.headers.get('x-request-id')).to.match(/^req_/);
  });

  it('answers GET /v1/auth/me with the user, and 401 without a token', async () => {
    const owner = await createOrg(s.deps);
    const me = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token });
    expect(me.status).to.equal(200);
    expect(me.body.user).to.include({ id: owner.id, email: owner.email });
    const anon = await http(s.baseUrl, 'GET', '/v1/auth/me');
    expect(anon.status).to.equal(401);
    expect(anon.headers.get('www-authenticate')).to.equal('Bearer');
    expect(anon.body.error.code).to.equal('UNAUTHORIZED');
    expect(anon.body.error.request_id).to.equal(anon.headers.get('x-request-id'));
  });

  it('serves the same procedure in-process', async () => {
    const owner = await createOrg(s.deps);
    const me = await s.caller(owner.token).auth.me();
    expect(me.user.id).to.equal(owner.id);
  });
});
