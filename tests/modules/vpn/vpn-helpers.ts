import { expect } from 'chai';
import { Event } from '../../../server/events/event.entity.js';
import { VpnConnection } from '../../../server/modules/vpn/vpn-connection.entity.js';
import { VpnServer } from '../../../server/modules/vpn/vpn-server.entity.js';
import type { AppDeps } from '../../../server/kit/deps.js';
import { isWireguardKey } from '../../../server/modules/vpn/wireguard.js';
import { http, type HttpResult } from '../../support/http.js';

export function createConnection(
  baseUrl: string,
  token: string,
  body: Record<string, unknown> = {},
): Promise<HttpResult> {
  return http(baseUrl, 'POST', '/v1/vpn/connections', {
    token,
    body: { name: 'Laptop', location: 'eu-central', protocol: 'wireguard', ...body },
  });
}

export async function countConnections(deps: AppDeps, organizationId: string): Promise<number> {
  return deps.db.orm.em.fork().count(VpnConnection, { organization: organizationId });
}

export async function eventsOf(deps: AppDeps, organizationId: string, type?: string): Promise<Event[]> {
  return deps.db.orm.em
    .fork()
    .find(Event, { organizationId, ...(type ? { type } : {}) }, { orderBy: { seq: 'asc' } });
}

/** The catalogue entity of a server, private key included (tests only). */
export async function serverWithKey(deps: AppDeps, id: string): Promise<VpnServer> {
  return deps.db.orm.em.fork().findOneOrFail(VpnServer, id, { populate: ['privateKey'] });
}

/** Parses a `wg-quick` file into its sections (pure TS, strict about what WireGuard accepts). */
export interface WgQuickSection {
  name: string;
  entries: Map<string, string>;
}
export function parseWgQuick(text: string): WgQuickSection[] {
  const sections: WgQuickSection[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*$/, '').trim();
    if (line === '') continue;
    const header = /^\[(Interface|Peer)\]$/.exec(line);
    if (header) {
      sections.push({ name: header[1]!, entries: new Map() });
      continue;
    }
    const kv = /^([A-Za-z]+)\s*=\s*(.+)$/.exec(line);
    if (!kv) throw new Error(`not a key = value line: ${raw}`);
    const current = sections.at(-1);
    if (!current) throw new Error(`entry before any section: ${raw}`);
    if (current.entries.has(kv[1]!)) throw new Error(`duplicate key ${kv[1]}`);
    current.entries.set(kv[1]!, kv[2]!);
  }
  return sections;
}

/** Checks a wg-quick file the way WireGuard reads it; returns the parsed sections. */
export function assertValidWgQuick(text: string) {
  const sections = parseWgQuick(text);
  expect(sections.map((s) => s.name)).to.deep.equal(['Interface', 'Peer']);
  const [iface, peer] = sections as [(typeof sections)[number], (typeof sections)[number]];
  expect([...iface.entries.keys()].sort()).to.deep.equal(['Address', 'DNS', 'PrivateKey']);
  expect(isWireguardKey(iface.entries.get('PrivateKey')!)).to.equal(true);
  for (const a of iface.entries
    .get('Address')!
    .split(',')
    .map((s) => s.trim())) {
    expect(a).to.match(/^(\d{1,3}\.){3}\d{1,3}\/(3[0-2]|[12]?\d)$/);
  }
  for (const d of iface.entries
    .get('DNS')!
    .split(',')
    .map((s) => s.trim())) {
    expect(d).to.match(/^(\d{1,3}\.){3}\d{1,3}$/);
  }
  expect([...peer.entries.keys()].sort()).to.deep.equal([
    'AllowedIPs',
    'Endpoint',
    'PersistentKeepalive',
    'PublicKey',
  ]);
  expect(isWireguardKey(peer.entries.get('PublicKey')!)).to.equal(true);
  expect(peer.entries.get('Endpoint')).to.match(/^[a-z0-9.-]+:\d{1,5}$/);
  for (const a of peer.entries
    .get('AllowedIPs')!
    .split(',')
    .map((s) => s.trim())) {
    expect(a).to.match(/^((\d{1,3}\.){3}\d{1,3}|[0-9a-f:]+)\/\d{1,3}$/);
  }
  expect(peer.entries.get('PersistentKeepalive')).to.match(/^\d+$/);
  return { iface, peer };
}
