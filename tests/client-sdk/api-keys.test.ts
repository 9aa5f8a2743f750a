// Test tier: server
import { expect } from 'chai';
import { PermissionError, createClient, type Fetch } from '@cloud-platform/client';
import { createOrg } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { rejection } from '../support/rejection.js';
import { countConnections } from '../modules/vpn/vpn-helpers.js';

/** A fetch that records the headers of every request it sends. */
function recording(sent: Headers[], base: Fetch = (u, init) => globalThis.fetch(u, init)): Fetch {
  return (url, init) => {
    sent.push(new Headers(init.headers));
    return base(url, init);
  };
}

const input = { name: 'Laptop', location: 'eu-central', protocol: 'wireguard' } as const;

describe('client SDK: API keys and idempotency', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  it('authenticates with an API key instead of a token pair', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const admin = createClient({ baseUrl: s.baseUrl, token: owner.token });
    const { secret } = await admin.apiKeys.create.mutate({ name: 'sdk', permissions: ['vpn:read'] });

    const sent: Headers[] = [];
    const client = createClient({ baseUrl: s.baseUrl, apiKey: secret, fetch: recording(sent) });
    const list = await client.vpn.connections.list.query({});
    expect(list.success).to.equal(true);
    expect(sent[0]!.get('authorization')).to.equal(`Bearer ${secret}`);
    // What the key lacks is a typed error.
    expect(await rejection(client.vpn.connections.create.mutate(input))).to.be.instanceOf(PermissionError);
    expect(await rejection(client.auth.me.query())).to.be.instanceOf(PermissionError);
  });

  it('sends an Idempotency-Key with every mutation, a new one per call, none with queries', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const sent: Headers[] = [];
    const client = createClient({ baseUrl: s.baseUrl, token: owner.token, fetch: recording(sent) });
    await client.vpn.connections.create.mutate(input);
    await client.vpn.connections.create.mutate(input);
    await client.vpn.connections.list.query({});
    const keys = sent.map((h) => h.get('idempotency-key'));
    expect(keys[0]).to.match(/^[0-9a-f-]{36}$/);
    expect(keys[1]).to.match(/^[0-9a-f-]{36}$/);
    expect(keys[0]).to.not.equal(keys[1]);
    expect(keys[2]).to.equal(null);
    expect(await countConnections(s.deps, owner.organizationId)).to.equal(2);
  });

  it('retries with the same key: a mutation whose answer was lost runs once', async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const sent: Headers[] = [];
    let dropped = false;
    // The first answer is lost on the way back, after the server made the change.
    const losing: Fetch = async (url, init) => {
      const res = await globalThis.fetch(url, init);
      if (!dropped && init.method === 'POST') {
        dropped = true;
        await res.body?.cancel();
        throw new TypeError('fetch failed: socket hang up');
      }
      return res;
    };
    const client = createClient({
      baseUrl: s.baseUrl,
      token: owner.token,
      maxRetries: 2,
      fetch: recording(sent, losing),
    });
    const { connection } = await client.vpn.connections.create.mutate(input);
    expect(sent.length).to.equal(2);
    expect(sent[1]!.get('idempotency-key')).to.equal(sent[0]!.get('idempotency-key'));
    expect(await countConnections(s.deps, owner.organizationId)).to.equal(1);
    const listed = await client.vpn.connections.list.query({});
    expect(listed.connections.map((c) => c.id)).to.deep.equal([connection.id]);
  });

  it("takes the caller's own key, so that a retry after a restart of the program is safe", async () => {
    const owner = await createOrg(s.deps, { plan: 'enterprise' });
    const client = createClient({ baseUrl: s.baseUrl, token: owner.token });
    const context = { idempotencyKey: `order-${owner.id}` };
    const a = await client.vpn.connections.create.mutate(input, { context });
    const b = await client.vpn.connections.create.mutate(input, { context });
    expect(b.connection.id).to.equal(a.connection.id);
    expect(await countConnections(s.deps, owner.organizationId)).to.equal(1);
  });
});
