// Test tier: server
import { expect } from 'chai';
import { toConnectionDetailDto } from '../../../server/modules/vpn/vpn.dto.js';
import { VpnConnection } from '../../../server/modules/vpn/vpn-connection.entity.js';
import type { VpnServer } from '../../../server/modules/vpn/vpn-server.entity.js';
import {
  drawTrafficRates,
  projectUsage,
  startSession,
  storeUsage,
  type UsageState,
} from '../../../server/modules/vpn/vpn.simulation.js';
import { serviceContext } from '../../../server/kit/deps.js';
import { storeActiveUsage } from '../../../server/modules/vpn/vpn-activation.service.js';
import { createOrg } from '../../support/factories.js';
import { sharedServer } from '../../support/server.js';
import { FakeClock } from '../../support/fake-clock.js';
import { waitFor } from '../../support/wait.js';
import { createConnection } from './vpn-helpers.js';

const T0 = new Date('2026-11-21T08:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

function state(over: Partial<UsageState> = {}): UsageState {
  return {
    status: 'active',
    connectedAt: T0,
    lastActivity: T0,
    uploadBytes: 0,
    downloadBytes: 0,
    sessionUploadBase: 0,
    sessionDownloadBase: 0,
    uploadRate: 1000,
    downloadRate: 5000,
    ...over,
  };
}

describe('VPN usage simulation', () => {
  it('draws plausible rates: upload 2–24 KiB/s, download 3–12× upload', () => {
    for (let i = 0; i < 200; i++) {
      const r = drawTrafficRates();
      expect(r.uploadRate).to.be.within(2048, 24 * 1024);
      expect(r.downloadRate / r.uploadRate).to.be.within(3, 12);
      expect(Number.isInteger(r.downloadRate / r.uploadRate)).to.equal(true);
    }
  });

  it('grows usage of an active connection with time since connected_at; last_activity is now', () => {
    const c = state({
      sessionUploadBase: 100,
      sessionDownloadBase: 200,
      uploadBytes: 100,
      downloadBytes: 200,
    });
    expect(projectUsage(c, at(0))).to.deep.equal({ upload: 100, download: 200, lastActivity: at(0) });
    expect(projectUsage(c, at(90_500))).to.deep.equal({
      upload: 100 + 90_500,
      download: 200 + 5 * 90_500,
      lastActivity: at(90_500),
    });
    // A clock behind connected_at never makes usage negative.
    expect(projectUsage(c, at(-5000)).upload).to.equal(100);
  });

  it('freezes usage when not active, and continues from it on the next session', () => {
    const c = state();
    storeUsage(c, at(10_000));
    c.status = 'inactive';
    c.connectedAt = null;
    expect(projectUsage(c, at(50_000))).to.deep.equal({
      upload: 10_000,
      download: 50_000,
      lastActivity: at(10_000),
    });
    c.status = 'active';
    startSession(c, at(60_000));
    expect(c.sessionUploadBase).to.equal(10_000);
    expect(c.connectedAt).to.deep.equal(at(60_000));
    const later = projectUsage(c, at(61_000));
    expect(later.upload).to.equal(10_000 + c.uploadRate);
    expect(later.download).to.equal(50_000 + c.downloadRate);
  });

  it('reports a human readable uptime true to connected_at', () => {
    const c = new VpnConnection();
    Object.assign(c, state({ connectedAt: at(0) }), {
      id: 'vpn_x',
      name: 'n',
      location: 'eu-west',
      protocol: 'wireguard',
      createdAt: T0,
      updatedAt: T0,
      autoConnect: false,
      server: { id: 'srv_x' },
      user: { id: 'usr_x' },
    });
    const server = { host: 'h.example', port: 51820, openvpnPort: 1194, publicKey: 'k' } as VpnServer;
    const dto = toConnectionDetailDto(c, server, at(2 * 3600_000 + 5 * 60_000 + 7_000));
    expect(dto.stats.uptime).to.equal('2h 5m');
    expect(dto.stats.uptime_seconds).to.equal(2 * 3600 + 5 * 60 + 7);
    expect(dto.stats.data_usage).to.deep.equal(dto.data_usage);
    expect(dto.connected_at).to.equal(T0.toISOString());
  });

  it('stores the same totals in SQL (periodic job) as reads report, never going backwards', async () => {
    const s = await sharedServer();
    const owner = await createOrg(s.deps);
    const id = (await createConnection(s.baseUrl, owner.token)).body.connection.id as string;
    const em = () => s.deps.db.orm.em.fork();
    const active = await waitFor('the connection to be active', async () => {
      const c = await em().findOneOrFail(VpnConnection, id);
      return c.status === 'active' ? c : undefined;
    });
    const clock = new FakeClock(new Date(active.connectedAt!.getTime() + 3_723_456));
    const projected = projectUsage(active, clock.now());
    await storeActiveUsage(serviceContext({ ...s.deps, clock }));
    const stored = await em().findOneOrFail(VpnConnection, id);
    expect(stored.uploadBytes).to.equal(projected.upload);
    expect(stored.downloadBytes).to.equal(projected.download);
    expect(stored.lastActivity).to.deep.equal(clock.now());
    expect(projectUsage(stored, clock.now())).to.deep.equal(projected);
    // An earlier clock does not move stored values back.
    await storeActiveUsage(serviceContext({ ...s.deps, clock: new FakeClock(active.connectedAt!) }));
    const again = await em().findOneOrFail(VpnConnection, id);
    expect(again.uploadBytes).to.equal(projected.upload);
    expect(again.lastActivity).to.deep.equal(clock.now());
  });
});
