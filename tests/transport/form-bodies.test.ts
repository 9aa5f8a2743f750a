// Test tier: server
import { expect } from 'chai';
import { sharedServer, type TestServer } from '../support/server.js';
import { expectError } from './envelope.js';
import { rawRequest } from './raw.js';

/**
 * HTML form bodies (`application/x-www-form-urlencoded`) are read for the routes that take a browser's form POST only
 * (a module route with `form: true`: the SAML ACS, docs/sso.md); every other route, REST, `/trpc` or a module's own,
 * answers 415 as for any body that is not JSON (docs/api-conventions.md, "Errors").
 */
describe('form bodies (docs/api-conventions.md, "Errors"; docs/sso.md)', function () {
  this.timeout(60_000);
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
  const post = (path: string, body: string, headers: Record<string, string> = FORM) =>
    rawRequest(`${s.baseUrl}${path}`, { method: 'POST', headers, body });

  for (const path of ['/v1/auth/login', '/trpc/auth.login', '/v1/agent/register', '/v1/auth/refresh']) {
    it(`refuses a form body on ${path} with 415 UNSUPPORTED_MEDIA_TYPE`, async () => {
      const res = await post(path, 'email=a%40b.test&password=12345678');
      if (path.startsWith('/trpc/')) {
        expect(res.status, res.text).to.equal(415);
        return;
      }
      expectError(res, 'UNSUPPORTED_MEDIA_TYPE');
    });
  }

  it('reads a form body on the SAML ACS (a form route): an unknown RelayState is its page, not a 415', async () => {
    const res = await post(
      '/v1/auth/sso/saml/acs',
      'SAMLResponse=PHNhbWw%2BPC9zYW1sPg%3D%3D&RelayState=unknown',
    );
    expect(res.status, res.text).to.equal(400);
    expect(String(res.headers['content-type'])).to.match(/^text\/html/);
    expect(res.text).to.contain('SSO_STATE_INVALID');
  });

  it('refuses a form body with a charset other than UTF-8 with 415, as a JSON one', async () => {
    const res = await post('/v1/auth/login', 'a=b', {
      'content-type': 'application/x-www-form-urlencoded; charset=iso-8859-1',
    });
    expectError(res, 'UNSUPPORTED_MEDIA_TYPE');
  });
});
