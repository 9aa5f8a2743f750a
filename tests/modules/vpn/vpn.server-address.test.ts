// Test tier: server
import { expect } from 'chai';
import { createOrg, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../../support/scratch-database.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { generateWireguardKeyPair } from '../../../server/modules/vpn/wireguard.js';

/**
 * A real server's `host:port` is unique within its organization only (docs/vpn-servers.md): another organization
 * registering the same address neither learns that a server is there (no 409) nor squats it.
 */
describe('VPN servers: an address is unique per organization, not across them', function () {
  this.timeout(60_000);
  let s: TestServer;
  let scratch: ScratchDatabase | undefined;
  before(async () => {
    scratch = await ownPostgresDatabase('vpn_server_address');
    s = await startTestServer({ env: scratch ? { DATABASE_URL: scratch.url } : {} });
  });
  after(async () => {
    await s?.close();
    await scratch?.drop();
  });

  const register = (owner: TestUser, host: string, port = 51820) =>
    http(s.baseUrl, 'POST', '/v1/vpn/servers', {
      token: owner.token,
      body: { location: 'eu-west', city: 'Dublin', country: 'Ireland', country_code: 'ie', host, port },
    });

  it("lets B register A's host:port without revealing A's server, and leaves A's server as it was", async () => {
    const a = await createOrg(s.deps);
    const b = await createOrg(s.deps);
    const host = `vpn-${Math.random().toString(36).slice(2, 10)}.example.net`;
    const mine = await register(a, host);
    expect(mine.status, mine.text).to.equal(201);
    const reg = await http(s.baseUrl, 'POST', '/v1/agent/register', {
      token: mine.body.token,
      body: { public_key: generateWireguardKeyPair().publicKey },
    });
    expect(reg.status, reg.text).to.equal(200);
    const serverOf = async (owner: TestUser, id: string) => {
      const list = await http(s.baseUrl, 'GET', '/v1/vpn/servers?limit=100', { token: owner.token });
      expect(list.status, list.text).to.equal(200);
      return (list.body.servers as { id: string }[]).find((x) => x.id === id);
    };
    const before = await serverOf(a, mine.body.server.id);
    expect(before).to.include({ host, port: 51820 });

    // B asks for the same address: created like any other (an answer that does not depend on A).
    const theirs = await register(b, host);
    expect(theirs.status, theirs.text).to.equal(201);
    expect(theirs.body.server.id).to.not.equal(mine.body.server.id);
    expect(theirs.body.server).to.include({ host, port: 51820, status: 'offline' });
    expect(JSON.stringify(theirs.body)).to.not.include(mine.body.server.id);
    // A port of B's own already taken: the same 201 shape for a fresh address shows nothing is special above.
    const fresh = await register(b, `other-${host}`);
    expect(fresh.status).to.equal(201);
    expect(Object.keys(fresh.body).sort()).to.deep.equal(Object.keys(theirs.body).sort());

    // A's server is untouched: same row, still A's, its agent's token still works; B sees nothing of it.
    const after = await serverOf(a, mine.body.server.id);
    expect(after).to.deep.equal(before);
    const again = await http(s.baseUrl, 'POST', '/v1/agent/register', {
      token: mine.body.token,
      body: { public_key: generateWireguardKeyPair().publicKey },
    });
    expect(again.status, again.text).to.equal(200);
    expect(await serverOf(b, mine.body.server.id)).to.equal(undefined);

    // Within one organization the address stays unique: 409 for A's second server there.
    const twice = await register(a, host);
    expect(twice.status, twice.text).to.equal(409);
    expect(twice.body.error.code).to.equal('CONFLICT');
    // And for B's now too.
    expect((await register(b, host)).status).to.equal(409);
  });
});
