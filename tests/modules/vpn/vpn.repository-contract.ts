import { expect } from 'chai';
import type { AppDeps } from '../../../server/kit/deps.js';
import { sha256Hex } from '../../../server/lib/crypto.js';
import { newId } from '../../../server/lib/ids.js';
import type { PageRequest } from '../../../server/lib/pagination.js';
import type { VpnProtocol } from '../../../server/modules/vpn/vpn.constants.js';
import type { NewConnection, VpnRepository } from '../../../server/modules/vpn/vpn.repository.js';
import type { ContractWorld } from '../../support/repository-contract.js';
import { actorOf } from '../../support/unit.js';

/** What the VPN contract runs against: a repository, the rows it refers to, and the deps its counting query takes. */
export interface VpnContractSubject {
  repo: VpnRepository;
  world: ContractWorld;
  deps: AppDeps;
}

const T0 = Date.parse('2026-11-01T00:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000);
// A WireGuard public key is 44 characters of base64.
const KEY = 'A'.repeat(43) + '=';

/**
 * The behaviour of a {@link VpnRepository} the VPN services rely on (docs/adding-a-module.md, "Checklist", step 3), run
 * against the MikroORM repository on the test database and against the in-memory one of the unit tests
 * (tests/modules/vpn/vpn.repository-contract.test.ts). The shared simulated catalogue of the database is not the
 * test's: server checks look only at the servers they create.
 */
export function describeVpnRepositoryContract(label: string, make: () => Promise<VpnContractSubject>): void {
  describe(`VpnRepository contract: ${label}`, () => {
    let s: VpnContractSubject;
    beforeEach(async () => {
      s = await make();
    });

    /** An agent server of the organization, registered and online unless told otherwise. */
    async function agentServer(
      organizationId: string,
      opts: { registered?: boolean; city?: string; protocols?: VpnProtocol[]; token?: string } = {},
    ) {
      const id = newId('srv');
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        s.repo.createServer(tx, {
          id,
          createdAt: at(0),
          updatedAt: at(0),
          kind: 'agent',
          organization: organizationId,
          tokenHash: sha256Hex(opts.token ?? id),
          location: 'eu-west',
          city: opts.city ?? 'Dublin',
          country: 'Ireland',
          countryCode: 'IE',
          host: `${id}.example.net`,
          port: 51820,
          protocols: opts.protocols ?? ['wireguard'],
          status: 'online',
          publicKey: KEY,
          privateKey: '',
          registeredAt: opts.registered === false ? null : at(0),
          lastReportAt: at(0),
          deletedAt: null,
        });
      });
      return id;
    }

    async function connection(
      organizationId: string,
      userId: string,
      serverId: string,
      seconds: number,
      extra: Partial<NewConnection> = {},
    ) {
      const id = newId('vpn');
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        s.repo.createConnection(tx, {
          id,
          now: at(seconds),
          organizationId,
          userId,
          serverId,
          name: `c${seconds}`,
          location: 'eu-west',
          protocol: 'wireguard',
          autoConnect: false,
          clientPublicKey: null,
          ...extra,
        });
      });
      return id;
    }

    async function setStatus(id: string, status: 'active' | 'inactive' | 'error', address?: string) {
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        const c = await s.repo.lockConnection(tx, id);
        c!.status = status;
        if (address) c!.clientAddress = address;
      });
    }

    it('finds a new connection for its owner and the admins, not for another member nor another organization', async () => {
      const a = await s.world.organization();
      const member = await s.world.user(a.organizationId, 'member');
      const admin = await s.world.user(a.organizationId, 'admin');
      const b = await s.world.organization();
      const server = await agentServer(a.organizationId);
      const id = await connection(a.organizationId, member, server, 1);
      const em = s.repo.fork();

      const own = await s.repo.findConnection(em, actorOf(a.organizationId, member, 'member'), id);
      expect(own).to.include({
        id,
        status: 'connecting',
        name: 'c1',
        connectGeneration: 1,
        peerEnabled: true,
      });
      expect(own!.organization.id).to.equal(a.organizationId);
      expect(own!.user.id).to.equal(member);
      const withServer = await s.repo.findConnection(
        s.repo.fork(),
        actorOf(a.organizationId, admin, 'admin'),
        id,
        { withServer: true },
      );
      expect(withServer!.server).to.include({ id: server, host: `${server}.example.net` });
      const other = await s.world.user(a.organizationId, 'member');
      expect(await s.repo.findConnection(em, actorOf(a.organizationId, other, 'member'), id)).to.equal(null);
      expect(await s.repo.findConnection(em, actorOf(b.organizationId, b.userId, 'owner'), id)).to.equal(
        null,
      );
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect((await s.repo.lockConnection(tx, id))!.id).to.equal(id);
      });
    });

    it('lists newest first with the filters and the total, by page and by cursor, within the organization', async () => {
      const a = await s.world.organization();
      const other = await s.world.user(a.organizationId);
      const b = await s.world.organization();
      const server = await agentServer(a.organizationId);
      const serverB = await agentServer(b.organizationId);
      const c1 = await connection(a.organizationId, a.userId, server, 1);
      const c2 = await connection(a.organizationId, a.userId, server, 2, { protocol: 'openvpn' });
      const c3 = await connection(a.organizationId, other, server, 3);
      const c4 = await connection(a.organizationId, a.userId, server, 4);
      await connection(b.organizationId, b.userId, serverB, 5);
      await setStatus(c4, 'active');
      const list = (filter: Record<string, unknown>, page: PageRequest = { page: 1, limit: 10 }) =>
        s.repo.listConnections(s.repo.fork(), { organizationId: a.organizationId, ...filter }, page);
      const ids = (p: { items: { id: string }[] }) => p.items.map((c) => c.id);

      const all = await list({});
      expect(ids(all)).to.deep.equal([c4, c3, c2, c1]);
      expect(all).to.include({ total: 4, hasMore: false });
      expect(all.items[0]).to.deep.include({
        status: 'active',
        user: { id: a.userId },
        server: { id: server },
      });
      expect(all.items[0]!.createdAt.getTime()).to.equal(at(4).getTime());
      expect(ids(await list({ userId: a.userId }))).to.deep.equal([c4, c2, c1]);
      expect(ids(await list({ status: 'connecting' }))).to.deep.equal([c3, c2, c1]);
      expect(ids(await list({ protocol: 'openvpn' }))).to.deep.equal([c2]);
      expect(ids(await list({ location: 'us-east' }))).to.deep.equal([]);
      const none = await list({ none: true });
      expect(none).to.deep.equal({ items: [], total: 0, hasMore: false });

      const page2 = await list({}, { page: 2, limit: 3 });
      expect(ids(page2)).to.deep.equal([c1]);
      expect(page2).to.include({ total: 4, hasMore: false });
      const first = await list({}, { page: 1, limit: 2 });
      expect(first).to.include({ total: 4, hasMore: true });
      expect(ids(await list({}, { page: 1, limit: 2, startingAfter: c3 }))).to.deep.equal([c2, c1]);
    });

    it('counts the connections the plan counts, per organization, locked or not; a removal lowers it', async () => {
      const a = await s.world.organization('pro');
      const b = await s.world.organization();
      const server = await agentServer(a.organizationId);
      const serverB = await agentServer(b.organizationId);
      const c1 = await connection(a.organizationId, a.userId, server, 1);
      await connection(a.organizationId, a.userId, server, 2);
      await connection(b.organizationId, b.userId, serverB, 3);

      expect(await s.repo.readPlan(s.repo.fork(), a.organizationId)).to.deep.equal({
        plan: 'pro',
        status: 'active',
      });
      expect(await s.repo.connectionCount(s.repo.fork(), s.deps, a.organizationId)).to.equal(2);
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect(await s.repo.lockPlan(tx, b.organizationId)).to.deep.equal({
          plan: 'starter',
          status: 'active',
        });
        expect(await s.repo.lockedConnectionCount(tx, s.deps, a.organizationId)).to.equal(2);
        s.repo.removeConnection(tx, (await s.repo.lockConnection(tx, c1))!);
      });
      expect(await s.repo.connectionCount(s.repo.fork(), s.deps, a.organizationId)).to.equal(1);
      expect(await s.repo.connectionCount(s.repo.fork(), s.deps, b.organizationId)).to.equal(1);
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect(await s.repo.lockConnection(tx, c1)).to.equal(null);
      });
    });

    it('locks the live connections oldest first, and disables the peers of one organization only', async () => {
      const a = await s.world.organization();
      const b = await s.world.organization();
      const server = await agentServer(a.organizationId);
      const serverB = await agentServer(b.organizationId);
      const c1 = await connection(a.organizationId, a.userId, server, 1, { clientPublicKey: KEY });
      const c2 = await connection(a.organizationId, a.userId, server, 2);
      const c3 = await connection(a.organizationId, a.userId, server, 3);
      const cb = await connection(b.organizationId, b.userId, serverB, 4, { clientPublicKey: KEY });
      await setStatus(c1, 'active', '10.8.0.2/32');
      await setStatus(c2, 'inactive');
      await setStatus(cb, 'active', '10.8.0.3/32');

      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect((await s.repo.lockLiveConnectionsOf(tx, a.organizationId)).map((c) => c.id)).to.deep.equal([
          c1,
          c3,
        ]);
        const onServer = (await s.repo.lockLiveConnectionsOnServer(tx, server)).map((c) => c.id);
        expect(onServer).to.deep.equal([c1, c3].sort());
      });
      expect(await s.repo.peersOf(s.repo.fork(), server)).to.deep.equal({
        version: 0,
        peers: [{ public_key: KEY, allowed_ips: ['10.8.0.2/32'] }],
      });

      await s.repo.transaction(s.repo.fork(), (tx) => s.repo.disablePeersOf(tx, a.organizationId));
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect(await s.repo.lockPeersOnServer(tx, server)).to.deep.equal([]);
        expect((await s.repo.lockPeersOnServer(tx, serverB)).map((c) => c.id)).to.deep.equal([cb]);
      });
      expect((await s.repo.peersOf(s.repo.fork(), server))!.peers).to.deep.equal([]);
      expect((await s.repo.peersOf(s.repo.fork(), serverB))!.peers).to.have.length(1);
    });

    it("shows an organization its registered agent servers by place, never another organization's", async () => {
      const a = await s.world.organization();
      const b = await s.world.organization();
      const dublin = await agentServer(a.organizationId, { city: 'Dublin', token: 'token-dublin' });
      const cork = await agentServer(a.organizationId, { city: 'Cork', protocols: ['wireguard', 'openvpn'] });
      const unregistered = await agentServer(a.organizationId, { registered: false });
      const theirs = await agentServer(b.organizationId);
      const mine = new Set([dublin, cork, unregistered, theirs]);
      const listed = async (filter: { protocol?: VpnProtocol }) =>
        (await s.repo.listServers(s.repo.fork(), a.organizationId, filter))
          .map((x) => x.id)
          .filter((id) => mine.has(id));

      expect(await listed({})).to.deep.equal([cork, dublin]);
      expect(await listed({ protocol: 'openvpn' })).to.deep.equal([cork]);
      const all = (await s.repo.allServers(s.repo.fork())).map((x) => x.id).filter((id) => mine.has(id));
      expect(all.sort()).to.deep.equal([...mine].sort());
      expect((await s.repo.agentServerByTokenHash(s.repo.fork(), sha256Hex('token-dublin')))?.id).to.equal(
        dublin,
      );

      const em = s.repo.fork();
      expect(await s.repo.addressTaken(em, `${dublin}.example.net`, 51820, a.organizationId)).to.equal(true);
      expect(await s.repo.addressTaken(em, `${dublin}.example.net`, 51820, b.organizationId)).to.equal(false);
      expect(await s.repo.addressTaken(em, `${dublin}.example.net`, 51820, null)).to.equal(false);
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect((await s.repo.lockAgentServer(tx, a.organizationId, dublin))?.id).to.equal(dublin);
        expect(await s.repo.lockAgentServer(tx, b.organizationId, dublin)).to.equal(null);
      });
      const least = await s.repo.leastBusyAgentServer(s.repo.fork(), a.organizationId, 'eu-west', 'openvpn');
      expect(least?.id).to.equal(cork);
    });

    it('hands out peer indexes while a server accepts the protocol; retiring an organization leaves the others', async () => {
      const a = await s.world.organization();
      const b = await s.world.organization();
      const server = await agentServer(a.organizationId);
      const theirs = await agentServer(b.organizationId);

      expect(await s.repo.claimPeerIndex(s.repo.fork(), server, 'wireguard')).to.equal(2);
      expect(await s.repo.claimPeerIndex(s.repo.fork(), server, 'wireguard')).to.equal(3);
      expect(await s.repo.claimPeerIndex(s.repo.fork(), server, 'openvpn')).to.equal(null);
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect(await s.repo.holdOpenServer(tx, server, 'wireguard')).to.equal(true);
        await s.repo.bumpPeers(tx, server);
      });
      expect((await s.repo.peersOf(s.repo.fork(), server))!.version).to.equal(1);

      await s.repo.transaction(s.repo.fork(), (tx) =>
        s.repo.retireOrganizationServers(tx, a.organizationId, at(9)),
      );
      const retired = await s.repo.getServer(s.repo.fork(), server);
      expect(retired).to.include({ status: 'offline', peersVersion: 2 });
      expect(retired.deletedAt?.getTime()).to.equal(at(9).getTime());
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        expect(await s.repo.lockServer(tx, server)).to.equal(null);
        expect((await s.repo.lockServer(tx, theirs))?.id).to.equal(theirs);
        expect(await s.repo.holdOpenServer(tx, server, 'wireguard')).to.equal(false);
      });
      expect(await s.repo.claimPeerIndex(s.repo.fork(), server, 'wireguard')).to.equal(null);
      expect(await s.repo.peersOf(s.repo.fork(), server)).to.equal(null);
    });

    it('finds the agent servers that stopped reporting', async () => {
      const a = await s.world.organization();
      const server = await agentServer(a.organizationId);
      const cutoff = at(30);
      expect(await s.repo.staleAgentServers(s.repo.fork(), cutoff)).to.include(server);
      expect(await s.repo.staleAgentServers(s.repo.fork(), at(-1))).not.to.include(server);
      await s.repo.transaction(s.repo.fork(), async (tx) => {
        const stale = await s.repo.lockStaleServer(tx, server, cutoff);
        expect(stale?.id).to.equal(server);
        stale!.status = 'offline';
      });
      expect(await s.repo.staleAgentServers(s.repo.fork(), cutoff)).not.to.include(server);
    });
  });
}
