// Test tier: server
import { expect } from 'chai';
import { User } from '../../server/access/user.entity.js';
import { MAX_INPUT_DEPTH } from '../../server/lib/input-limits.js';
import { WebhookDelivery } from '../../server/modules/webhooks/webhook-delivery.entity.js';
import { Webhook } from '../../server/modules/webhooks/webhook.entity.js';
import { VpnConnection } from '../../server/modules/vpn/vpn-connection.entity.js';
import { createOrg, uniqueEmail, type TestUser } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { expectError } from './envelope.js';
import { rawRequest } from './raw.js';

const NUL = '\u0000';
const LONE_HIGH = '\ud800';
const LONE_LOW = '\udc00';

/** `{"a": {"a": … 1}}` with `levels` objects; the body around it adds its own. */
function nested(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
}

/** The same as JSON text, built without recursion (JSON.stringify would overflow the stack at 10,000 levels). */
function nestedJson(levels: number): string {
  return '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);
}

// Text the database cannot store (NUL; lone UTF-16 surrogates, which are not Unicode and would be stored as U+FFFD)
// and input nested deeper than 32 levels are refused with 400 VALIDATION_ERROR for every procedure, on /v1 (body,
// query and path values), /trpc and in-process, before anything reaches the database.
describe('input the database cannot store', () => {
  let s: TestServer;
  let owner: TestUser;
  before(async () => {
    s = await sharedServer();
    owner = await createOrg(s.deps, { plan: 'enterprise' });
  });

  const count = (
    entity: typeof User | typeof Webhook | typeof VpnConnection | typeof WebhookDelivery,
    where: object,
  ) => s.deps.db.orm.em.fork().count(entity as typeof User, where);

  describe('strings with NUL or a lone surrogate', () => {
    for (const field of ['email', 'password', 'name', 'organization_name'] as const) {
      for (const [label, bad] of [
        ['NUL', `a${NUL}b`],
        ['a lone surrogate', `a${LONE_HIGH}b`],
      ] as const) {
        it(`refuses ${label} in register's ${field} with 400 naming the field, and stores nothing`, async () => {
          const email = uniqueEmail('nul');
          const body: Record<string, string> = {
            email,
            password: 'correct-horse-battery',
            name: 'Nul Test',
            organization_name: 'Nul Org',
            [field]: field === 'email' ? email.replace('@', `${bad}@`) : bad,
          };
          const res = await http(s.baseUrl, 'POST', '/v1/auth/register', { body });
          const err = expectError(res, 'VALIDATION_ERROR');
          expect(err.details).to.deep.include({
            path: field,
            message: err.details!.find((d: { path: string }) => d.path === field)!.message,
          });
          expect(err.message).to.match(label === 'NUL' ? /NUL/ : /surrogate/);
          expect(await count(User, { email })).to.equal(0);
        });
      }
    }

    it('refuses them in webhook fields over /v1, /trpc and in-process, and stores nothing', async () => {
      const org = await createOrg(s.deps);
      const base = { url: 'http://127.0.0.1:9/hook', events: ['user.created'] };
      const rest = await http(s.baseUrl, 'POST', '/v1/webhooks', {
        token: org.token,
        body: { ...base, description: `x${NUL}` },
      });
      expect(expectError(rest, 'VALIDATION_ERROR').details).to.deep.equal([
        { path: 'description', message: 'Text must not contain NUL characters (U+0000)' },
      ]);
      const trpc = await http(s.baseUrl, 'POST', '/trpc/webhooks.create', {
        token: org.token,
        body: { ...base, description: `x${LONE_LOW}y` },
      });
      expect(trpc.status, trpc.text).to.equal(400);
      expect(trpc.body.error.data.code).to.equal('VALIDATION_ERROR');
      expect(trpc.body.error.data.details).to.deep.equal([
        { path: 'description', message: 'Text must be valid Unicode (it contains a lone UTF-16 surrogate)' },
      ]);
      expect(trpc.body.error.data.request_id).to.equal(trpc.headers.get('x-request-id'));
      let thrown: any;
      await s
        .caller(org.token)
        .webhooks.create({ ...base, events: [`user.created${NUL}`] } as never)
        .catch((e: unknown) => (thrown = e));
      expect(thrown?.cause?.code).to.equal('VALIDATION_ERROR');
      expect(thrown?.cause?.details).to.deep.equal([
        { path: 'events.0', message: 'Text must not contain NUL characters (U+0000)' },
      ]);
      expect(await count(Webhook, { organization: org.organizationId })).to.equal(0);
    });

    it('refuses a lone surrogate sent as a JSON escape, and keeps a pair (an emoji) intact', async () => {
      const org = await createOrg(s.deps);
      const bad = await rawRequest(`${s.baseUrl}/v1/vpn/connections`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${org.token}` },
        body: '{"name":"Laptop \\udc00","location":"eu-central","protocol":"wireguard"}',
      });
      expect(expectError(bad, 'VALIDATION_ERROR').details).to.deep.equal([
        { path: 'name', message: 'Text must be valid Unicode (it contains a lone UTF-16 surrogate)' },
      ]);
      expect(await count(VpnConnection, { organization: org.organizationId })).to.equal(0);
      const good = await rawRequest(`${s.baseUrl}/v1/vpn/connections`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${org.token}` },
        body: '{"name":"Laptop \\ud83d\\ude00","location":"eu-central","protocol":"wireguard"}',
      });
      expect(good.status, good.text).to.equal(201);
      expect(good.body.connection.name).to.equal('Laptop \u{1F600}');
    });

    it('refuses NUL in a query value (GET /v1/vpn/connections?user_id=active%00) with 400, not 500', async () => {
      const res = await http(s.baseUrl, 'GET', '/v1/vpn/connections?user_id=active%00', {
        token: owner.token,
      });
      expect(expectError(res, 'VALIDATION_ERROR').details).to.deep.equal([
        { path: 'user_id', message: 'Text must not contain NUL characters (U+0000)' },
      ]);
      const repeated = await http(s.baseUrl, 'GET', '/v1/vpn/connections?status=active&status=%00', {
        token: owner.token,
      });
      expectError(repeated, 'VALIDATION_ERROR');
    });

    it('refuses NUL in a path value and in /trpc query input', async () => {
      const path = await http(s.baseUrl, 'GET', '/v1/vpn/connections/vpn_%00', { token: owner.token });
      expect(expectError(path, 'VALIDATION_ERROR').details).to.deep.equal([
        { path: 'id', message: 'Text must not contain NUL characters (U+0000)' },
      ]);
      const input = encodeURIComponent(JSON.stringify({ user_id: `a${NUL}` }));
      const trpc = await http(s.baseUrl, 'GET', `/trpc/vpn.connections.list?input=${input}`, {
        token: owner.token,
      });
      expect(trpc.status, trpc.text).to.equal(400);
      expect(trpc.body.error.data.code).to.equal('VALIDATION_ERROR');
    });

    it('refuses them in field names of free-form objects (custom_data), naming the field', async () => {
      const org = await createOrg(s.deps);
      const hook = await http(s.baseUrl, 'POST', '/v1/webhooks', {
        token: org.token,
        body: { url: 'http://127.0.0.1:9/hook', events: ['user.created'] },
      });
      expect(hook.status, hook.text).to.equal(201);
      const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${hook.body.webhook.id}/test`, {
        token: org.token,
        body: { custom_data: { ok: 'yes', [`k${NUL}`]: 1, list: ['a', `b${LONE_HIGH}`] } },
      });
      const err = expectError(res, 'VALIDATION_ERROR');
      expect(err.details).to.deep.equal([
        { path: 'custom_data.k\uFFFD', message: 'Field name: Text must not contain NUL characters (U+0000)' },
        {
          path: 'custom_data.list.1',
          message: 'Text must be valid Unicode (it contains a lone UTF-16 surrogate)',
        },
      ]);
      expect(await count(WebhookDelivery, { webhook: hook.body.webhook.id })).to.equal(0);
    });
  });

  it('refuses a body whose bytes are not UTF-8 with 400 INVALID_JSON, and stores nothing', async () => {
    const email = uniqueEmail('latin1');
    const json = JSON.stringify({
      email,
      password: 'correct-horse-battery',
      name: 'Zoë',
      organization_name: 'Org',
    });
    // "Zoë" in Latin-1: the byte 0xEB alone is not UTF-8.
    const res = await fetch(`${s.baseUrl}/v1/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(json, 'latin1'),
    });
    expect(res.status).to.equal(400);
    const body = (await res.json()) as { error: { code: string; message: string; request_id: string } };
    expect(body.error.code).to.equal('INVALID_JSON');
    expect(body.error.message).to.match(/UTF-8/);
    expect(body.error.request_id).to.equal(res.headers.get('x-request-id'));
    expect(await count(User, { email })).to.equal(0);
  });

  describe('nesting', () => {
    let org: TestUser;
    let hookId: string;
    before(async () => {
      org = await createOrg(s.deps);
      const hook = await http(s.baseUrl, 'POST', '/v1/webhooks', {
        token: org.token,
        body: { url: 'http://127.0.0.1:9/hook', events: ['user.created'] },
      });
      hookId = hook.body.webhook.id;
    });

    it('refuses custom_data nested 10,000 levels deep with 400, not 500, and records no delivery', async () => {
      const res = await rawRequest(`${s.baseUrl}/v1/webhooks/${hookId}/test`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${org.token}` },
        body: `{"custom_data":${nestedJson(10_000)}}`,
      });
      const err = expectError(res, 'VALIDATION_ERROR');
      expect(err.message).to.match(/nested more than 32 levels/);
      expect(err.details).to.have.length(1);
      const trpc = await rawRequest(`${s.baseUrl}/trpc/webhooks.test`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${org.token}` },
        body: `{"id":"${hookId}","custom_data":${nestedJson(10_000)}}`,
      });
      expect(trpc.status, trpc.text.slice(0, 300)).to.equal(400);
      expect(trpc.body.error.data.code).to.equal('VALIDATION_ERROR');
      expect(await count(WebhookDelivery, { webhook: hookId })).to.equal(0);
    });

    it(`accepts ${MAX_INPUT_DEPTH} levels in all and refuses ${MAX_INPUT_DEPTH + 1}`, async () => {
      // The body is one level, custom_data's object the second.
      const ok = await http(s.baseUrl, 'POST', `/v1/webhooks/${hookId}/test`, {
        token: org.token,
        body: { custom_data: nested(MAX_INPUT_DEPTH - 1) },
      });
      expect(ok.status, ok.text).to.equal(200);
      const deep = await http(s.baseUrl, 'POST', `/v1/webhooks/${hookId}/test`, {
        token: org.token,
        body: { custom_data: nested(MAX_INPUT_DEPTH) },
      });
      expectError(deep, 'VALIDATION_ERROR');
      expect(await count(WebhookDelivery, { webhook: hookId })).to.equal(1);
    });

    it('refuses deep arrays too', async () => {
      const res = await rawRequest(`${s.baseUrl}/v1/webhooks/${hookId}/test`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${org.token}` },
        body: `{"custom_data":{"a":${'['.repeat(5000)}${']'.repeat(5000)}}}`,
      });
      expectError(res, 'VALIDATION_ERROR');
    });
  });

  it('checks the caller first, as schema validation does (401 before 400)', async () => {
    const res = await http(s.baseUrl, 'GET', '/v1/vpn/connections?user_id=active%00');
    expectError(res, 'UNAUTHORIZED');
  });
});
