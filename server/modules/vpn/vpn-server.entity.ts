import { defineEntity, p } from '@mikro-orm/core';
import { BaseSchema } from '../../db/base.entity.js';
import { SERVER_STATUSES, type VpnLocation } from './vpn.constants.js';

/** A server of the catalogue. Removed servers are kept (soft delete) so their connections keep their history. */
export const VpnServerSchema = defineEntity({
  name: 'VpnServer',
  tableName: 'vpn_servers',
  extends: BaseSchema,
  indexes: [{ name: 'vpn_servers_location_index', properties: ['location'], where: { deletedAt: null } }],
  uniques: [
    { name: 'vpn_servers_host_port_unique', properties: ['host', 'port'], where: { deletedAt: null } },
  ],
  properties: {
    /** One of VPN_LOCATIONS; a plain string column (no check constraint), validated by the API. */
    location: p.string().length(32).$type<VpnLocation>(),
    city: p.string().length(100),
    country: p.string().length(100),
    countryCode: p.string().length(2),
    host: p.string().length(253),
    /** WireGuard (UDP) port. */
    // The migration's `between 1 and 65535`, in the form PostgreSQL stores (and the ORM compares) it.
    port: p.integer().check('"port" >= 1 and "port" <= 65535'),
    openvpnPort: p.integer().default(1194).check('"openvpn_port" >= 1 and "openvpn_port" <= 65535'),
    protocols: p.array(),
    status: p.enum(SERVER_STATUSES).default('online'),
    load: p.integer().default(0),
    latency: p.integer().default(0),
    publicKey: p.string().length(44),
    /** Never leaves the server: hidden from serialisation and not loaded unless asked for. */
    privateKey: p.string().length(44).hidden().lazy(),
    /** The last tunnel address index handed out (see wireguard.ts clientAddress). */
    lastPeerIndex: p.integer().default(1),
    deletedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});

export class VpnServer extends VpnServerSchema.class {}
VpnServerSchema.setClass(VpnServer);
