// Test tier: server
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { edgePort } from '../../../server/modules/hosting/hosting.module.js';
import { createOrg, type TestUser } from '../../support/factories.js';
import { startDnsServer, type TestDnsServer } from '../../support/dns-server.js';
import { http } from '../../support/http.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { newSite } from './hosting-helpers.js';
import { edgeRequest, serveFiles } from './edge-helpers.js';

/**
 * Custom domains are served only once verified by a TXT record (docs/sites.md, "Custom domains"). The DNS server is
 * the test's own, on loopback (DNS_SERVERS), so that a record can be published and withdrawn.
 */
describe('Hosting: custom domains are verified before they are served', function () {
  this.timeout(120_000);
  let s: TestServer;
  let dns: TestDnsServer;
  let dataDir: string;
  let scratch: ScratchDatabase | undefined;
  let port: number;
  let victim: TestUser;
  let attacker: TestUser;

  before(async () => {
    dns = await startDnsServer();
    dataDir = mkdtempSync(join(process.cwd(), '.data-test-domains-'));
    // On PostgreSQL, a database of its own: nothing else running on the shared one can get in its way.
    scratch = await ownPostgresDatabase('hosting_domains');
    s = await startTestServer({
      env: {
        ...(scratch ? { DATABASE_URL: scratch.url } : {}),
        EDGE_PORT: '0',
        DATA_DIR: dataDir,
        ARTIFACTS_DIR: join(dataDir, 'artifacts'),
        DNS_SERVERS: dns.address,
      },
    });
    port = edgePort(s.deps)!;
    victim = await createOrg(s.deps, { plan: 'pro' });
    attacker = await createOrg(s.deps, { plan: 'pro' });
  });

  after(async () => {
    await s?.close();
    await scratch?.drop();
    await dns?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  const verify = (token: string, id: string) =>
    http(s.baseUrl, 'POST', `/v1/hosting/sites/${id}/domain/verify`, { token });
  const getSite = async (token: string, id: string) => {
    const res = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${id}`, { token });
    expect(res.status, res.text).to.equal(200);
    return res.body.site;
  };
  const publish = (domain: string, ...values: string[]) => dns.txt.set(`_cloud-platform.${domain}`, values);

  it("does not serve another organization's unverified claim, nor let it block the owner's", async () => {
    const domain = 'www.victim-corp.example';
    // The attacker claims the victim's domain first and makes it live.
    const squat = await newSite(s.baseUrl, attacker.token, { name: 'Squat', domain });
    expect(squat.domain).to.equal(domain);
    await serveFiles(s.deps, squat.id, { 'index.html': 'attacker page' });
    const served = await edgeRequest(port, domain);
    expect(served.body.toString()).to.not.include('attacker page');
    expect(served.status, served.body.toString()).to.equal(404);
    expect(squat.domain_verification.status).to.equal('pending');
    expect(squat.domain_verification.record).to.deep.equal({
      type: 'TXT',
      name: `_cloud-platform.${domain}`,
      value: squat.domain_verification.record.value,
    });
    expect(squat.domain_verification.record.value).to.match(/^[0-9a-f]{32}$/);
    // Its own address is served as usual.
    expect((await edgeRequest(port, new URL(squat.url).host)).body.toString()).to.equal('attacker page');

    // The victim's claim of its own domain is not refused.
    const own = await newSite(s.baseUrl, victim.token, { name: 'Corp', domain });
    expect(own.domain_verification.status).to.equal('pending');
    expect(own.domain_verification.record.value).to.not.equal(squat.domain_verification.record.value);
    await serveFiles(s.deps, own.id, { 'index.html': 'victim page' });

    // Nothing published yet: 409 DOMAIN_NOT_VERIFIED naming the record expected, and nothing changes.
    const early = await verify(victim.token, own.id);
    expect(early.status, early.text).to.equal(409);
    expect(early.body.error.code).to.equal('DOMAIN_NOT_VERIFIED');
    expect(early.body.error.message).to.include(`_cloud-platform.${domain}`);
    expect(early.body.error.details[0].record).to.deep.equal(own.domain_verification.record);
    expect((await getSite(victim.token, own.id)).domain_verification.status).to.equal('pending');

    // The victim publishes its value: the attacker's token is not there, so its verify fails.
    publish(domain, own.domain_verification.record.value, 'v=spf1 -all');
    const squatTry = await verify(attacker.token, squat.id);
    expect(squatTry.status, squatTry.text).to.equal(409);
    expect(squatTry.body.error.code).to.equal('DOMAIN_NOT_VERIFIED');
    expect(squatTry.body.error.details[0].found).to.include('v=spf1 -all');

    const ok = await verify(victim.token, own.id);
    expect(ok.status, ok.text).to.equal(200);
    expect(ok.body.site.id).to.equal(own.id);
    expect(ok.body.site.domain_verification).to.deep.equal({
      status: 'verified',
      record: own.domain_verification.record,
    });
    // A second verify answers the same, unchanged.
    expect((await verify(victim.token, own.id)).body.site.domain_verification.status).to.equal('verified');

    // The edge serves the verified owner's site at once.
    const after = await edgeRequest(port, domain);
    expect(after.status).to.equal(200);
    expect(after.body.toString()).to.equal('victim page');
    expect((await edgeRequest(port, `${domain}.:80`)).body.toString()).to.equal('victim page');

    // Even with its value published too (the DNS changed hands), the attacker cannot take a verified domain.
    publish(domain, own.domain_verification.record.value, squat.domain_verification.record.value);
    const late = await verify(attacker.token, squat.id);
    expect(late.status, late.text).to.equal(409);
    expect(late.body.error.code).to.equal('CONFLICT');
    expect((await getSite(attacker.token, squat.id)).domain_verification.status).to.equal('pending');
    // Nor claim it again in a new site.
    const again = await http(s.baseUrl, 'POST', '/v1/hosting/sites', {
      token: attacker.token,
      body: { name: 'Squat 2', git_repo: 'https://github.com/acme/web', framework: 'react', domain },
    });
    expect(again.status, again.text).to.equal(409);
    expect(again.body.error.code).to.equal('CONFLICT');
    expect((await edgeRequest(port, domain)).body.toString()).to.equal('victim page');

    // Removing the domain frees it: the other claim can now be verified (its value is published).
    const removed = await http(s.baseUrl, 'PUT', `/v1/hosting/sites/${own.id}`, {
      token: victim.token,
      body: { domain: null },
    });
    expect(removed.status, removed.text).to.equal(200);
    expect(removed.body.site.domain_verification).to.equal(null);
    expect((await edgeRequest(port, domain)).status).to.equal(404);
    const taken = await verify(attacker.token, squat.id);
    expect(taken.status, taken.text).to.equal(200);
    expect((await edgeRequest(port, domain)).body.toString()).to.equal('attacker page');
  });

  it('gives a new value whenever the domain changes, and a changed domain is pending again', async () => {
    const site = await newSite(s.baseUrl, victim.token, { name: 'Changes', domain: 'a.changes.example' });
    const first = site.domain_verification.record.value;
    publish('a.changes.example', first);
    expect((await verify(victim.token, site.id)).status).to.equal(200);

    const moved = await http(s.baseUrl, 'PUT', `/v1/hosting/sites/${site.id}`, {
      token: victim.token,
      body: { domain: 'b.changes.example' },
    });
    expect(moved.status, moved.text).to.equal(200);
    const second = moved.body.site.domain_verification;
    expect(second.status).to.equal('pending');
    expect(second.record.name).to.equal('_cloud-platform.b.changes.example');
    expect(second.record.value).to.not.equal(first);
    // The old record proves nothing of the new domain.
    publish('b.changes.example', first);
    expect((await verify(victim.token, site.id)).body.error.code).to.equal('DOMAIN_NOT_VERIFIED');

    // Back to the first domain: pending again, with yet another value.
    const back = await http(s.baseUrl, 'PUT', `/v1/hosting/sites/${site.id}`, {
      token: victim.token,
      body: { domain: 'a.changes.example' },
    });
    expect(back.body.site.domain_verification.status).to.equal('pending');
    expect(back.body.site.domain_verification.record.value).to.not.be.oneOf([first, second.record.value]);
    // Changing something else keeps the domain as it is.
    publish('a.changes.example', back.body.site.domain_verification.record.value);
    expect((await verify(victim.token, site.id)).status).to.equal(200);
    const renamed = await http(s.baseUrl, 'PUT', `/v1/hosting/sites/${site.id}`, {
      token: victim.token,
      body: { name: 'Renamed', domain: 'a.changes.example' },
    });
    expect(renamed.body.site.domain_verification.status).to.equal('verified');
  });

  it('lets exactly one of two sites verifying one domain at the same moment win', async () => {
    const domain = 'race.example';
    const a = await newSite(s.baseUrl, victim.token, { name: 'Race A', domain });
    const b = await newSite(s.baseUrl, attacker.token, { name: 'Race B', domain });
    publish(domain, a.domain_verification.record.value, b.domain_verification.record.value);
    const answers = await Promise.all([verify(victim.token, a.id), verify(attacker.token, b.id)]);
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses, answers.map((r) => r.text).join('\n')).to.deep.equal([200, 409]);
    expect(answers.find((r) => r.status === 409)!.body.error.code).to.equal('CONFLICT');
    const verified = [await getSite(victim.token, a.id), await getSite(attacker.token, b.id)].filter(
      (x) => x.domain_verification.status === 'verified',
    );
    expect(verified).to.have.length(1);
  });

  it('refuses to verify a site without a custom domain, and answers 404 for a site of another organization', async () => {
    const plain = await newSite(s.baseUrl, victim.token, { name: 'Plain' });
    expect(plain.domain_verification).to.equal(null);
    const res = await verify(victim.token, plain.id);
    expect(res.status).to.equal(409);
    expect(res.body.error.code).to.equal('CONFLICT');
    const other = await verify(attacker.token, plain.id);
    expect(other.status).to.equal(404);
  });

  it('looks records up only through DNS_SERVERS', () => {
    expect(dns.queries).to.include('_cloud-platform.www.victim-corp.example');
  });
});
