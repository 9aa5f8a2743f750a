import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { User } from '../../access/user.entity.js';
import { BaseSchema } from '../../db/base.entity.js';
import { CONNECTION_STATUSES, VPN_PROTOCOLS } from './vpn.constants.js';
import { VpnServer } from './vpn-server.entity.js';

export const VpnConnectionSchema = defineEntity({
  name: 'VpnConnection',
  tableName: 'vpn_connections',
  extends: BaseSchema,
  indexes: [
    // A page for any combination of the list's filters is a range of this index (migration 30, list_counts).
    {
      name: 'vpn_connections_filter_index',
      expression:
        'create index "vpn_connections_filter_index" on "vpn_connections" ("organization_id", "status", "protocol", "location", "created_at" desc, "id" desc)',
    },
    {
      name: 'vpn_connections_owner_filter_index',
      expression:
        'create index "vpn_connections_owner_filter_index" on "vpn_connections" ("organization_id", "user_id", "status", "protocol", "location", "created_at" desc, "id" desc)',
    },
    // A user's connections and an organization's, newest first.
    // Written as SQL: the ORM reads a descending `id` after a column named `…_id` back as ascending, so it
    // compares such an index by name only; tests/db/schema-drift.test.ts compares its definition.
    {
      name: 'vpn_connections_owner_index',
      expression:
        'create index "vpn_connections_owner_index" on "vpn_connections" ("organization_id", "user_id", "created_at" desc, "id" desc)',
    },
    {
      name: 'vpn_connections_organization_index',
      expression:
        'create index "vpn_connections_organization_index" on "vpn_connections" ("organization_id", "created_at" desc, "id" desc)',
    },
    // The connections whose usage is sampled.
    { name: 'vpn_connections_active_index', properties: ['id'], where: { status: 'active' } },
  ],
  properties: {
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    /** The owner: the user who created it (or received it when that user was deleted). */
    user: () => p.manyToOne(User).index(),
    server: () => p.manyToOne(VpnServer).index(),
    name: p.string().length(100),
    location: p.string().length(32),
    protocol: p.enum(VPN_PROTOCOLS),
    status: p.enum(CONNECTION_STATUSES).default('connecting'),
    /** Why the connection is in `error` (or was refused), for humans. */
    statusMessage: p.string().length(300).nullable(),
    autoConnect: p.boolean().default(false),
    /** Bumped on every (re)connect: an activation job only acts on the generation it was queued for. */
    connectGeneration: p.integer().default(1),
    /** WireGuard only; the private half is never stored. */
    clientPublicKey: p.string().length(44).nullable(),
    clientAddress: p.string().length(43).nullable(),
    connectedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    lastActivity: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /**
     * Totals as of `lastActivity`; reads of an active connection add the traffic since (vpn.simulation.ts).
     * `defaultRaw`: the column default is the number 0, not the string '0' the ORM would otherwise compare it to.
     */
    uploadBytes: p.bigint('number').default(0).defaultRaw('0'),
    downloadBytes: p.bigint('number').default(0).defaultRaw('0'),
    /** Totals when the current session started. */
    sessionUploadBase: p.bigint('number').default(0).defaultRaw('0'),
    sessionDownloadBase: p.bigint('number').default(0).defaultRaw('0'),
    /** Simulated bytes per second of the current session. */
    uploadRate: p.integer().default(0),
    downloadRate: p.integer().default(0),
    /** Agent servers: whether the connection is a peer of the server's interface (false once disconnected). */
    peerEnabled: p.boolean().default(true),
    /** Agent servers: the client's latest handshake as the agent reported it. */
    lastHandshakeAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** Agent servers: the peer's byte counters at the latest report (received by the server, sent by it). */
    reportedRx: p.bigint('number').default(0).defaultRaw('0'),
    reportedTx: p.bigint('number').default(0).defaultRaw('0'),
  },
});

export class VpnConnection extends VpnConnectionSchema.class {}
VpnConnectionSchema.setClass(VpnConnection);
