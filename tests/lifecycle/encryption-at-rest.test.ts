// Test tier: server
import { createHmac } from 'node:crypto';
import { expect } from 'chai';
import { decryptSecret } from '../../server/lib/crypto.js';
import { webhooksModule } from '../../server/modules/webhooks/webhooks.module.js';
import { hostingModule } from '../../server/modules/hosting/hosting.module.js';
import { createOrg } from '../support/factories.js';
import { http } from '../support/http.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { logsOf, newDeployment, newSite, waitForDeployment } from '../modules/hosting/hosting-helpers.js';
import { startReceiver, verifyWithThirdPartyLibraries, type Receiver } from '../modules/webhooks/receiver.js';

const CIPHERTEXT = /^v2\.[A-Za-z0-9_-]{8}\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]+$/;

/**
 * Webhook secrets and site environment variables are stored encrypted with the at-rest key (docs/security.md,
 * "Encryption at rest"); values stored in clear before that are still read, and encrypted at start or on the next
 * write.
 */
describe('encryption at rest: webhook secrets and environment variables', function () {
  this.timeout(60_000);
  let s: TestServer;
  let rx: Receiver;
  before(async () => {
    s = await sharedServer();
    rx = await startReceiver();
  });
  after(async () => {
    await rx?.close();
  });

  const sql = <T>(query: string, params: unknown[] = []) =>
    s.deps.db.orm.em.fork().execute<T[]>(query, params);

  async function webhookRow(id: string) {
    const [row] = await sql<{ secret: string; previous_secret: string | null }>(
      'select "secret", "previous_secret" from "webhooks" where "id" = ?',
      [id],
    );
    return row!;
  }

  async function siteRow(id: string): Promise<string> {
    const [row] = await sql<{ vars: string }>(
      'select "environment_variables"::text as "vars" from "hosting_sites" where "id" = ?',
      [id],
    );
    return row!.vars;
  }

  /** A test delivery, verified as a receiver holding `secret` would (`previous`: the secret a rotation replaced). */
  async function testDelivery(token: string, webhookId: string, secret: string, previous = false) {
    const before = rx.requests.length;
    const res = await http(s.baseUrl, 'POST', `/v1/webhooks/${webhookId}/test`, { token, body: {} });
    expect(res.status, res.text).to.equal(200);
    const [req] = (await rx.waitFor((r) => r.length > before)).slice(before);
    if (!previous) {
      expect(await verifyWithThirdPartyLibraries(secret, req!)).to.equal(true);
    } else {
      const hmac = createHmac('sha256', secret).update(req!.raw).digest('hex');
      expect(req!.headers['x-vpn-signature-previous']).to.equal(`sha256=${hmac}`);
    }
  }

  it('stores a webhook secret encrypted, and signs deliveries with it (also after a rotation)', async () => {
    const owner = await createOrg(s.deps);
    const created = await http(s.baseUrl, 'POST', '/v1/webhooks', {
      token: owner.token,
      body: { url: rx.url, events: ['user.created'] },
    });
    expect(created.status, created.text).to.equal(201);
    const { id, secret } = created.body.webhook as { id: string; secret: string };
    const row = await webhookRow(id);
    expect(row.secret).to.match(CIPHERTEXT);
    expect(row.secret).not.to.include(secret.slice(6, 20));
    expect(decryptSecret(s.deps.keys.secrets, row.secret)).to.equal(secret);

    const got = await http(s.baseUrl, 'GET', `/v1/webhooks/${id}`, { token: owner.token });
    expect(got.body.webhook.secret).to.equal(`whsec_****${secret.slice(-4)}`);
    await testDelivery(owner.token, id, secret);

    const rotated = await http(s.baseUrl, 'POST', `/v1/webhooks/${id}/rotate-secret`, {
      token: owner.token,
      body: { expires_in_hours: 1 },
    });
    expect(rotated.status, rotated.text).to.equal(200);
    const after = await webhookRow(id);
    expect(after.secret).to.match(CIPHERTEXT);
    expect(after.previous_secret).to.match(CIPHERTEXT);
    expect(decryptSecret(s.deps.keys.secrets, after.previous_secret!)).to.equal(secret);
    await testDelivery(owner.token, id, rotated.body.secret);
    await testDelivery(owner.token, id, secret, true);
  });

  it('reads a webhook secret stored in clear, and encrypts it at start', async () => {
    const owner = await createOrg(s.deps);
    const created = await http(s.baseUrl, 'POST', '/v1/webhooks', {
      token: owner.token,
      body: { url: rx.url, events: ['user.created'] },
    });
    const { id, secret } = created.body.webhook as { id: string; secret: string };
    // As a row written before encryption at rest.
    await sql('update "webhooks" set "secret" = ? where "id" = ?', [secret, id]);
    const got = await http(s.baseUrl, 'GET', `/v1/webhooks/${id}`, { token: owner.token });
    expect(got.body.webhook.secret).to.equal(`whsec_****${secret.slice(-4)}`);
    await testDelivery(owner.token, id, secret);

    expect(await webhooksModule.encryptAtRest?.(s.deps)).to.be.at.least(1);
    const row = await webhookRow(id);
    expect(row.secret).to.match(CIPHERTEXT);
    expect(decryptSecret(s.deps.keys.secrets, row.secret)).to.equal(secret);
    await testDelivery(owner.token, id, secret);
    // Nothing left in clear: a second run changes nothing.
    expect(await webhooksModule.encryptAtRest?.(s.deps)).to.equal(0);
  });

  it('stores environment variables encrypted; the API shows them, builds get their names', async () => {
    const owner = await createOrg(s.deps);
    const vars = { API_URL: 'https://api.example.com', SECRET_SAUCE: 'tomato-basil-1234' };
    const site = await newSite(s.baseUrl, owner.token, { environment_variables: vars });
    expect(site.environment_variables).to.deep.equal(vars);
    const stored = await siteRow(site.id);
    expect(stored).not.to.include('tomato-basil-1234').and.not.include('SECRET_SAUCE');
    expect(JSON.parse(stored)).to.match(CIPHERTEXT);

    const got = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}`, { token: owner.token });
    expect(got.body.site.environment_variables).to.deep.equal(vars);
    expect(Object.keys(got.body.site.environment_variables)).to.deep.equal(['API_URL', 'SECRET_SAUCE']);

    const d = await newDeployment(s.baseUrl, owner.token, site.id);
    expect((await waitForDeployment(s.baseUrl, owner.token, site.id, d.id)).status).to.equal('success');
    const logs = await logsOf(s.baseUrl, owner.token, site.id, d.id, '?limit=1000');
    const text = logs.logs.map((l: { message: string }) => l.message).join('\n');
    expect(text).to.include('API_URL').and.include('SECRET_SAUCE');
    expect(text).not.to.include('tomato-basil-1234');
  });

  it('reads environment variables stored in clear; the next update or the start-up step encrypts them', async () => {
    const owner = await createOrg(s.deps);
    const a = await newSite(s.baseUrl, owner.token, { name: 'A' });
    const b = await newSite(s.baseUrl, owner.token, { name: 'B' });
    const vars = { TOKEN: 'clear-value-5678' };
    for (const site of [a, b]) {
      await sql('update "hosting_sites" set "environment_variables" = ?::json where "id" = ?', [
        JSON.stringify(vars),
        site.id,
      ]);
      const got = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}`, { token: owner.token });
      expect(got.body.site.environment_variables).to.deep.equal(vars);
    }
    // An update that does not touch the variables still writes them encrypted.
    const renamed = await http(s.baseUrl, 'PUT', `/v1/hosting/sites/${a.id}`, {
      token: owner.token,
      body: { name: 'A2' },
    });
    expect(renamed.status, renamed.text).to.equal(200);
    expect(renamed.body.site.environment_variables).to.deep.equal(vars);
    expect(await siteRow(a.id)).not.to.include('clear-value-5678');

    expect(await siteRow(b.id)).to.include('clear-value-5678');
    expect(await hostingModule.encryptAtRest?.(s.deps)).to.be.at.least(1);
    expect(await siteRow(b.id)).not.to.include('clear-value-5678');
    const got = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${b.id}`, { token: owner.token });
    expect(got.body.site.environment_variables).to.deep.equal(vars);
    expect(await hostingModule.encryptAtRest?.(s.deps)).to.equal(0);
  });
});
