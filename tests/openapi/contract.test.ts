// Test tier: server
import { expect } from 'chai';
import type { ObservedResponse } from '../../server/app.js';
import { contractObserver, contractValidator, takeContractViolations } from '../support/contract.js';
import { createOrg } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer } from '../support/server.js';

/**
 * The contract test itself (tests/support/contract.ts) runs on every response of the suite; these tests show that
 * it tells a conforming response from each kind of violation, and that the test servers report to it.
 */
describe('contract test: responses held to the OpenAPI document', () => {
  const validator = contractValidator();
  const json = { 'content-type': 'application/json; charset=utf-8', 'x-request-id': 'req_1' };
  const response = (over: Partial<ObservedResponse>): ObservedResponse => ({
    method: 'GET',
    route: '/v1/auth/me',
    url: '/v1/auth/me',
    status: 401,
    headers: { ...json, 'www-authenticate': 'Bearer' },
    body: JSON.stringify({
      success: false,
      error: { code: 'UNAUTHORIZED', message: 'Authentication required', request_id: 'req_1' },
    }),
    ...over,
  });

  it('accepts a response that matches its operation', () => {
    expect(validator.check(response({}))).to.deep.equal([]);
  });

  it('reports a status the operation does not declare', () => {
    const problems = validator.check(response({ method: 'GET', route: '/v1/auth/me', status: 409 }));
    expect(problems).to.have.length(1);
    expect(problems[0]).to.match(/GET \/auth\/me → 409: status 409 \(UNAUTHORIZED\) is not declared/);
  });

  it('reports a body that does not match the schema', () => {
    const body = JSON.stringify({ success: false, error: { code: 'NOPE', message: 'x', request_id: 'r' } });
    const problems = validator.check(response({ body }));
    expect(problems.join('\n')).to.match(/body: \/error\/code must be equal to one of the allowed values/);
    const extra = JSON.stringify({ success: true, user: { id: 'usr_1' }, stray: 1 });
    expect(validator.check(response({ status: 200, body: extra })).join('\n')).to.match(/body:/);
  });

  it('reports a missing required header, a header not matching its schema and an undeclared media type', () => {
    const noRequestId = validator.check(response({ headers: { 'content-type': 'application/json' } }));
    expect(noRequestId.join('\n')).to.match(/required header X-Request-Id is missing/);
    const badRetry = validator.check(
      response({
        method: 'POST',
        route: '/v1/auth/login',
        status: 429,
        headers: { ...json, 'retry-after': 'soon' },
        body: JSON.stringify({
          success: false,
          error: { code: 'TOO_MANY_LOGIN_ATTEMPTS', message: 'x', request_id: 'req_1' },
        }),
      }),
    );
    expect(badRetry.join('\n')).to.match(/header Retry-After: .*must be integer/);
    const html = validator.check(response({ headers: { ...json, 'content-type': 'text/html' } }));
    expect(html.join('\n')).to.match(/media type text\/html is not declared/);
  });

  it('leaves responses that are not of a documented operation alone', () => {
    expect(validator.check(response({ route: undefined, status: 404 }))).to.deep.equal([]);
    expect(validator.check(response({ route: '/healthz', status: 200 }))).to.deep.equal([]);
  });

  it('records what a test server sends: a conforming call adds nothing, a violation is kept for the root hook', async () => {
    const s = await sharedServer();
    const owner = await createOrg(s.deps);
    const me = await http(s.baseUrl, 'GET', '/v1/auth/me', { token: owner.token });
    expect(me.status).to.equal(200);
    expect(takeContractViolations()).to.deep.equal([]);
    // What the root hook would fail this test with, had the server sent it.
    contractObserver(response({ status: 418 }));
    const recorded = takeContractViolations();
    expect(recorded).to.have.length(1);
    expect(recorded[0]).to.match(/status 418/);
  });
});
