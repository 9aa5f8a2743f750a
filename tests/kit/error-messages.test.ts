// Test tier: server
import { expect } from 'chai';
import { AppError, notFound } from '../../server/lib/errors.js';
import { createOrg } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';

/**
 * The errors a newcomer meets first say what to do next (docs/api-conventions.md, "Errors"), with the code, the
 * status and the envelope unchanged.
 */
describe('error messages a person can act on', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  function expectEnvelope(
    res: { status: number; body: any; headers: Headers },
    status: number,
    code: string,
    nextStep: RegExp,
  ) {
    expect(res.status, JSON.stringify(res.body)).to.equal(status);
    expect(res.body.success).to.equal(false);
    const keys = Object.keys(res.body.error).sort().join(',');
    expect(keys).to.be.oneOf(['code,message,request_id', 'code,details,message,request_id']);
    expect(res.body.error.code).to.equal(code);
    expect(res.body.error.request_id).to.equal(res.headers.get('x-request-id'));
    expect(res.body.error.message).to.match(nextStep);
  }

  it('a wrong password: check both, or reset the password', async () => {
    const owner = await createOrg(s.deps);
    const res = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email: owner.email, password: 'not-the-password' },
    });
    expectEnvelope(
      res,
      401,
      'INVALID_CREDENTIALS',
      /^Invalid email or password: .*POST \/v1\/auth\/password-reset$/,
    );
    // Unknown email: the same body (docs/accounts-and-sessions.md, "Accounts and sessions").
    const unknown = await http(s.baseUrl, 'POST', '/v1/auth/login', {
      body: { email: 'nobody@example.test', password: 'not-the-password' },
    });
    expect(unknown.body.error.message).to.equal(res.body.error.message);
  });

  it('no token, a token that is not one, an expired token: log in (or refresh)', async () => {
    expectEnvelope(
      await http(s.baseUrl, 'GET', '/v1/vpn/connections'),
      401,
      'UNAUTHORIZED',
      /^Authentication required: log in with POST \/v1\/auth\/login, then send Authorization: Bearer <token>$/,
    );
    expectEnvelope(
      await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: 'not.a.jwt' }),
      401,
      'UNAUTHORIZED',
      /^Invalid access token: log in again with POST \/v1\/auth\/login$/,
    );
    expectEnvelope(
      await http(s.baseUrl, 'GET', '/v1/vpn/connections', { token: 'sk_live_notakey' }),
      401,
      'UNAUTHORIZED',
      /POST \/v1\/api-keys$/,
    );
    const owner = await createOrg(s.deps);
    const later = new Date(Date.now() + 2 * 3600_000);
    let thrown: unknown;
    try {
      s.deps.tokens.verify(owner.token, later);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).to.be.instanceOf(AppError);
    expect((thrown as AppError).code).to.equal('TOKEN_EXPIRED');
    expect((thrown as AppError).status).to.equal(401);
    expect((thrown as AppError).message).to.equal(
      'Access token has expired: get a new one with POST /v1/auth/refresh, or log in again with POST /v1/auth/login',
    );
  });

  it('an unknown id: where to list the ones that exist', async () => {
    const owner = await createOrg(s.deps);
    expectEnvelope(
      await http(s.baseUrl, 'GET', '/v1/vpn/connections/vpn_doesnotexist0000000', { token: owner.token }),
      404,
      'NOT_FOUND',
      /^VPN connection not found: check the id, or list them with GET \/v1\/vpn\/connections$/,
    );
    expectEnvelope(
      await http(s.baseUrl, 'GET', '/v1/users/usr_doesnotexist0000000', { token: owner.token }),
      404,
      'NOT_FOUND',
      /^User not found: check the id, or list them with GET \/v1\/users$/,
    );
    // A resource listed nowhere keeps the short form.
    expect(notFound('Organization').message).to.equal('Organization not found');
  });

  it('a plan limit: delete one or upgrade, with the details unchanged', async () => {
    const owner = await createOrg(s.deps);
    for (const name of ['one', 'two']) {
      const created = await http(s.baseUrl, 'POST', '/v1/databases', {
        token: owner.token,
        body: { name, engine: 'postgresql' },
      });
      expect(created.status, created.text).to.equal(201);
    }
    const third = await http(s.baseUrl, 'POST', '/v1/databases', {
      token: owner.token,
      body: { name: 'three', engine: 'postgresql' },
    });
    expectEnvelope(
      third,
      402,
      'PLAN_LIMIT_EXCEEDED',
      /^Your plan allows 2 databases: delete one, or upgrade the plan with PUT \/v1\/billing\/subscription \(the plans: GET \/v1\/billing\/plans\)$/,
    );
    expect(third.body.error.details).to.deep.equal([{ resource: 'databases', limit: 2, current: 2 }]);
  });

  it('a 409 and a missing permission say what to do', async () => {
    const owner = await createOrg(s.deps);
    const again = await http(s.baseUrl, 'POST', '/v1/users', {
      token: owner.token,
      body: { email: owner.email, send_invitation: false },
    });
    expectEnvelope(
      again,
      409,
      'CONFLICT',
      /^A user with this email already exists in this organization: find them with GET \/v1\/users$/,
    );
    const { body } = await http(s.baseUrl, 'POST', '/v1/api-keys', {
      token: owner.token,
      body: { name: 'read only', permissions: ['vpn:read'] },
    });
    expectEnvelope(
      await http(s.baseUrl, 'POST', '/v1/vpn/connections', {
        token: body.secret,
        body: { name: 'x', location: 'eu-west', protocol: 'wireguard' },
      }),
      403,
      'FORBIDDEN',
      /^This action requires the vpn:write permission: an owner or an admin can grant it \(PUT \/v1\/users\/\{id\}\/permissions\)$/,
    );
  });
});
