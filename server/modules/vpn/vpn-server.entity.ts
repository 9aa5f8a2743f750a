import { defineEntity, p } from '@mikro-orm/core';
import { BaseSchema } from '../../db/base.entity.js';
import { SERVER_STATUSES, VPN_LOCATIONS } from './vpn.constants.js';

/** A server of the catalogue. Removed servers are kept (soft delete) so their connections keep their history. */
export const VpnServerSchema = defineEntity({
  name: 'VpnServer',
  tableName: 'vpn_servers',
  extends: BaseSchema,
  properties: {
    location: p.enum(VPN_LOCATIONS),
    city: p.string().length(100),
    country: p.string().length(100),
    countryCode: p.string().length(2),
    host: p.string().length(253),
    /** WireGuard (UDP) port. */
    port: p.integer(),
    openvpnPort: p.integer().default(1194),
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
