import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from '../../access/organization.entity.js';
import { BaseSchema } from '../../db/base.entity.js';
import { SERVER_KINDS, SERVER_STATUSES, type VpnLocation } from './vpn.constants.js';

/** A server of the catalogue. Removed servers are kept (soft delete) so their connections keep their history. */
export const VpnServerSchema = defineEntity({
  name: 'VpnServer',
  tableName: 'vpn_servers',
  extends: BaseSchema,
  indexes: [{ name: 'vpn_servers_location_index', properties: ['location'], where: { deletedAt: null } }],
  uniques: [
    // One server per address in each organization's own servers, and in the shared catalogue: an organization never
    // learns of (or blocks) another's server at an address (docs/vpn-servers.md).
    {
      name: 'vpn_servers_organization_host_port_unique',
      expression:
        'create unique index "vpn_servers_organization_host_port_unique" on "vpn_servers" ("organization_id", "host", "port") where "deleted_at" is null and "organization_id" is not null',
    },
    {
      name: 'vpn_servers_catalogue_host_port_unique',
      expression:
        'create unique index "vpn_servers_catalogue_host_port_unique" on "vpn_servers" ("host", "port") where "deleted_at" is null and "organization_id" is null',
    },
    { name: 'vpn_servers_token_hash_unique', properties: ['tokenHash'], where: { deletedAt: null } },
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
    /** `simulated` (the shared catalogue) or `agent` (a host running the VPN agent, docs/vpn-servers.md). */
    kind: p.enum(SERVER_KINDS).default('simulated'),
    /** The organization an agent server serves (its owner registered it); null for the shared catalogue. */
    organization: () => p.manyToOne(Organization).nullable().deleteRule('cascade').index(),
    /** SHA-256 (hex) of the agent's server token; the token itself is shown once, at creation. */
    tokenHash: p.string().length(64).nullable().hidden().lazy(),
    /** When the agent first registered (the server joins the catalogue then). */
    registeredAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** The agent's latest report (or registration): `offline` once older than the bound of docs/vpn-servers.md. */
    lastReportAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
    /** Bumped whenever the set of peers the agent must hold changes (what its long poll waits for). */
    peersVersion: p.integer().default(0),
    /**
     * Never leaves the server: hidden from serialisation and not loaded unless asked for. Empty for an agent
     * server, whose private key stays on its host.
     */
    privateKey: p.string().length(44).hidden().lazy(),
    /** The last tunnel address index handed out (see wireguard.ts clientAddress). */
    lastPeerIndex: p.integer().default(1),
    deletedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});

export class VpnServer extends VpnServerSchema.class {}
VpnServerSchema.setClass(VpnServer);
