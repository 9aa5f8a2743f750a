import { z } from 'zod';
import { pageQueryShape, pageResponse } from '../../lib/pagination.js';
import { okResponse, zPathId, zUserIdFilter } from '../../lib/schema.js';
import {
  CONNECTION_STATUSES,
  DEFAULT_WIREGUARD_PORT,
  SERVER_KINDS,
  SERVER_STATUSES,
  VPN_LOCATIONS,
  VPN_PROTOCOLS,
} from './vpn.constants.js';

const ZConnectionId = zPathId('vpn', 'Connection');

// ---------- inputs ----------

export const ZListConnectionsInput = z
  .object({
    ...pageQueryShape,
    status: z.enum(CONNECTION_STATUSES).optional().describe('Only connections in this state'),
    protocol: z.enum(VPN_PROTOCOLS).optional().describe('Only connections of this protocol'),
    location: z.enum(VPN_LOCATIONS).optional().describe('Only connections to this location'),
    user_id: zUserIdFilter(
      'Owners and admins: list the connections of this user (`usr_…`), or of everyone with `all`. ' +
        "Without it, the caller's own connections are listed. A member naming anyone but themselves gets an empty list.",
    ),
  })
  .prefault({});
export type TListConnectionsInput = z.infer<typeof ZListConnectionsInput>;

export const ZConnectionIdInput = z.object({
  id: ZConnectionId,
});
export type TConnectionIdInput = z.infer<typeof ZConnectionIdInput>;

const ZName = z.string().trim().min(1).max(100).describe('A label for the connection, 1 to 100 characters');

export const ZCreateConnectionInput = z.strictObject({
  name: ZName,
  location: z
    .enum(VPN_LOCATIONS)
    .describe('Location code of the server to connect to; an online server there must support `protocol`'),
  protocol: z.enum(VPN_PROTOCOLS).describe('`wireguard` or `openvpn`'),
  auto_connect: z
    .boolean()
    .optional()
    .describe('Reconnect automatically when the client starts (stored for clients; default false)'),
});
export type TCreateConnectionInput = z.infer<typeof ZCreateConnectionInput>;

export const ZUpdateConnectionInput = z.strictObject({
  id: ZConnectionId,
  name: ZName.optional(),
  auto_connect: z.boolean().optional(),
  status: z
    .enum(['active', 'inactive'])
    .optional()
    .describe(
      '`inactive` disconnects (emits `vpn.disconnected` when it was active); `active` reconnects an inactive or ' +
        'failed connection: it goes to `connecting`, then `active` after the provisioning delay.',
    ),
});
export type TUpdateConnectionInput = z.infer<typeof ZUpdateConnectionInput>;

export const ZListServersInput = z
  .object({
    location: z.enum(VPN_LOCATIONS).optional().describe('Only servers at this location'),
    protocol: z.enum(VPN_PROTOCOLS).optional().describe('Only servers supporting this protocol'),
  })
  .prefault({});
export type TListServersInput = z.infer<typeof ZListServersInput>;

const hostname =
  /^(?=.{1,253}$)([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const ipv4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

export const ZCreateServerInput = z.strictObject({
  location: z.enum(VPN_LOCATIONS).describe('Location code the server is listed under'),
  city: z.string().trim().min(1).max(100),
  country: z.string().trim().min(1).max(100),
  country_code: z
    .string()
    .trim()
    .max(2, 'must be a two-letter country code')
    .regex(/^[A-Za-z]{2}$/, 'must be a two-letter country code')
    .transform((s) => s.toUpperCase())
    .describe('ISO 3166-1 alpha-2'),
  host: z
    .string()
    .trim()
    .toLowerCase()
    .max(253, 'must be a host name or IPv4 address')
    .refine((h) => ipv4.test(h) || hostname.test(h), 'must be a host name or IPv4 address')
    .describe(
      'Public host name or IPv4 address clients reach the server at (the `endpoint` of its connections)',
    ),
  port: z
    .number()
    .int()
    .min(1)
    .max(65535)
    .default(DEFAULT_WIREGUARD_PORT)
    .describe('WireGuard (UDP) port the agent listens on'),
});
export type TCreateServerInput = z.infer<typeof ZCreateServerInput>;

export const ZServerIdInput = z.object({ id: zPathId('srv', 'Server') });
export type TServerIdInput = z.infer<typeof ZServerIdInput>;

// ---------- outputs ----------

const ZTimestamp = z.string().describe('ISO 8601 UTC with milliseconds');
const ZNullableTimestamp = z.string().nullable().describe('ISO 8601 UTC with milliseconds, or null');

export const ZDataUsage = z
  .object({
    upload: z.number().int().describe('Bytes sent through the tunnel'),
    download: z.number().int().describe('Bytes received through the tunnel'),
  })
  .meta({ id: 'VpnDataUsage' });

const connectionFields = {
  id: z.string().describe('`vpn_…`'),
  name: z.string(),
  status: z
    .enum(CONNECTION_STATUSES)
    .describe('`connecting` → `active`; `inactive` when disconnected; `error`'),
  status_message: z.string().nullable().describe('Why the connection is in `error`; null otherwise'),
  location: z.enum(VPN_LOCATIONS),
  protocol: z.enum(VPN_PROTOCOLS),
  server_id: z.string().describe('`srv_…` the connection terminates on'),
  user_id: z.string().describe('Owner of the connection, `usr_…`'),
  auto_connect: z.boolean(),
  created_at: ZTimestamp,
  updated_at: ZTimestamp,
  connected_at: ZNullableTimestamp.describe('Start of the current session; null unless `active`'),
  last_activity: ZNullableTimestamp.describe('Last traffic seen; null before the first session'),
  data_usage: ZDataUsage,
};

export const ZConnection = z.object(connectionFields).meta({ id: 'VpnConnection' });
export type TConnection = z.infer<typeof ZConnection>;

export const ZConnectionDetail = z
  .object({
    ...connectionFields,
    config: z.object({
      endpoint: z.string().describe('`host:port` of the server'),
      public_key: z.string().describe("The server's public key (base64, 32 bytes)"),
      client_public_key: z
        .string()
        .nullable()
        .describe('WireGuard: the public half of the key pair made for this connection; null for OpenVPN'),
      address: z.string().nullable().describe('WireGuard: tunnel address of the client; null for OpenVPN'),
      dns: z.array(z.string()).describe('Resolvers to use inside the tunnel'),
      allowed_ips: z.array(z.string()).describe('Routed through the tunnel'),
      wg_quick: z
        .string()
        .nullable()
        .describe(
          'Only in the create response of a WireGuard connection: a complete `wg-quick` configuration including ' +
            'the client private key. The private key is not stored and cannot be retrieved again; null elsewhere.',
        ),
    }),
    stats: z.object({
      uptime: z.string().describe('Human readable time since `connected_at` (`3h 12m`); `0s` unless active'),
      uptime_seconds: z.number().int().describe('The same, in seconds'),
      data_usage: ZDataUsage,
    }),
  })
  .meta({ id: 'VpnConnectionDetail' });
export type TConnectionDetail = z.infer<typeof ZConnectionDetail>;

export const ZListConnectionsOutput = pageResponse('connections', ZConnection);
export type TListConnectionsOutput = z.infer<typeof ZListConnectionsOutput>;

export const ZConnectionOutput = okResponse({ connection: ZConnectionDetail });
export type TConnectionOutput = z.infer<typeof ZConnectionOutput>;

export const ZDeleteConnectionOutput = okResponse({
  message: z.string(),
  id: z.string().describe('The deleted connection'),
});
export type TDeleteConnectionOutput = z.infer<typeof ZDeleteConnectionOutput>;

export const ZServer = z
  .object({
    id: z.string().describe('`srv_…`'),
    location: z.enum(VPN_LOCATIONS),
    city: z.string(),
    country: z.string(),
    country_code: z.string().describe('ISO 3166-1 alpha-2'),
    host: z.string(),
    port: z.number().int().describe('WireGuard (UDP) port'),
    openvpn_port: z.number().int().describe('OpenVPN port'),
    protocols: z.array(z.enum(VPN_PROTOCOLS)),
    status: z.enum(SERVER_STATUSES),
    load: z.number().int().describe('Percent of capacity in use'),
    latency: z.number().int().describe('Typical round trip in milliseconds'),
    public_key: z
      .string()
      .describe(
        'WireGuard public key (base64, 32 bytes); empty for an agent server that has not registered yet',
      ),
    kind: z
      .enum(SERVER_KINDS)
      .describe(
        '`simulated`: the shared test-mode catalogue; `agent`: a real server of your organization running the VPN agent',
      ),
    last_report_at: ZNullableTimestamp.describe(
      "Agent servers: the agent's latest report; null for simulated ones",
    ),
    created_at: ZTimestamp,
  })
  .meta({ id: 'VpnServer' });
export type TServer = z.infer<typeof ZServer>;

export const ZCreateServerOutput = okResponse({
  server: ZServer,
  token: z
    .string()
    .describe(
      'The server token (`vst_…`) the agent authenticates with. Shown only in this response; stored hashed.',
    ),
});
export type TCreateServerOutput = z.infer<typeof ZCreateServerOutput>;

export const ZDeleteServerOutput = okResponse({
  message: z.string(),
  id: z.string().describe('The deleted server'),
});
export type TDeleteServerOutput = z.infer<typeof ZDeleteServerOutput>;

export const ZListServersOutput = okResponse({
  servers: z.array(ZServer),
  total: z.number().int(),
});
export type TListServersOutput = z.infer<typeof ZListServersOutput>;
