import { router } from '../../trpc/init.js';
import { requirePermission, requireRole } from '../../trpc/procedures.js';
import {
  ZCreateServerInput,
  ZCreateServerOutput,
  ZDeleteServerOutput,
  ZServerIdInput,
  ZConnectionIdInput,
  ZConnectionOutput,
  ZCreateConnectionInput,
  ZDeleteConnectionOutput,
  ZListConnectionsInput,
  ZListConnectionsOutput,
  ZListServersInput,
  ZListServersOutput,
  ZUpdateConnectionInput,
} from './vpn.schema.js';
import * as vpn from './vpn.service.js';
import * as servers from './vpn-servers.service.js';
import * as agents from './vpn-agents.service.js';

const tags = ['VPN'];

const connections = router({
  list: requirePermission('vpn:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/vpn/connections',
        tags,
        summary: "List the caller's VPN connections",
        description:
          'Newest first, paged. Owners and admins may pass `user_id` (or `all`) to see other users’ connections; ' +
          'for a member, another user’s id gives an empty list.',
      },
    })
    .input(ZListConnectionsInput)
    .output(ZListConnectionsOutput)
    .query(({ ctx, input }) => vpn.listConnections(ctx, input)),

  create: requirePermission('vpn:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/vpn/connections',
        tags,
        summary: 'Create a VPN connection',
        description:
          'The connection starts `connecting` and becomes `active` after the provisioning delay (emitting ' +
          '`vpn.connected`). A WireGuard connection gets its own key pair: this response alone carries ' +
          '`connection.config.wg_quick`, a ready `wg-quick` configuration with the client private key, which is ' +
          'not stored. Beyond the plan limit: 402 `PLAN_LIMIT_EXCEEDED`.',
      },
      errors: {
        PLAN_LIMIT_EXCEEDED:
          'The plan allows no more VPN connections; details name `{resource, limit, current}`',
      },
      successStatus: 201,
      location: '/vpn/connections/{connection.id}',
    })
    .input(ZCreateConnectionInput)
    .output(ZConnectionOutput)
    .mutation(({ ctx, input }) => vpn.createConnection(ctx, input)),

  get: requirePermission('vpn:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/vpn/connections/{id}',
        tags,
        summary: 'A VPN connection (detail view)',
        description:
          'The connection with its server, addresses, status and traffic. The client private key is never shown ' +
          'again after creation.',
      },
    })
    .input(ZConnectionIdInput)
    .output(ZConnectionOutput)
    .query(({ ctx, input }) => vpn.getConnection(ctx, input)),

  update: requirePermission('vpn:write')
    .meta({
      openapi: {
        method: 'PUT',
        path: '/vpn/connections/{id}',
        tags,
        summary: 'Rename, set auto-connect, disconnect or reconnect a VPN connection',
        description:
          '`status: "inactive"` disconnects (emitting `vpn.disconnected` if it was active); `status: "active"` ' +
          'reconnects an inactive or failed connection through `connecting`.',
      },
      errors: { CONFLICT: 'Reconnecting a connection whose server left the catalogue' },
    })
    .input(ZUpdateConnectionInput)
    .output(ZConnectionOutput)
    .mutation(({ ctx, input }) => vpn.updateConnection(ctx, input)),

  delete: requirePermission('vpn:delete')
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/vpn/connections/{id}',
        tags,
        summary: 'Delete a VPN connection',
        description: 'Emits `vpn.disconnected` when the connection was active.',
      },
    })
    .input(ZConnectionIdInput)
    .output(ZDeleteConnectionOutput)
    .mutation(({ ctx, input }) => vpn.deleteConnection(ctx, input)),
});

const serverCatalogue = router({
  list: requirePermission('vpn:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/vpn/servers',
        tags,
        summary: 'The VPN server catalogue',
        description:
          'Servers in the catalogue, by location: the shared simulated servers (`kind: simulated`) and the real ' +
          "servers of the caller's organization (`kind: agent`) once their agent has registered. Private keys are " +
          'never returned.',
      },
    })
    .input(ZListServersInput)
    .output(ZListServersOutput)
    .query(({ ctx, input }) => servers.listServers(ctx, input)),

  create: requireRole('owner')
    .meta({
      openapi: {
        method: 'POST',
        path: '/vpn/servers',
        tags,
        summary: 'Register a real VPN server (owner)',
        description:
          'Creates a WireGuard server of the organization and its server token (`vst_…`), shown only in this ' +
          'response and stored hashed. Run the VPN agent on the host with that token (docs/vpn-servers.md): when ' +
          'it registers, the server joins the catalogue of this organization only (`vpn.server.created`), and new ' +
          'connections in its location are placed on it.',
      },
      errors: {
        CONFLICT:
          'A server of this organization with this host and port already exists (servers of other ' +
          'organizations are never considered)',
      },
      successStatus: 201,
      location: '/vpn/servers/{server.id}',
    })
    .input(ZCreateServerInput)
    .output(ZCreateServerOutput)
    .mutation(({ ctx, input }) => agents.createAgentServer(ctx, input)),

  delete: requireRole('owner')
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/vpn/servers/{id}',
        tags,
        summary: 'Remove a real VPN server (owner)',
        description:
          'Revokes its token, drops its peers (their connections go to `error`; active ones emit ' +
          '`vpn.disconnected`) and emits `vpn.server.deleted`. Simulated servers are not removable here.',
      },
    })
    .input(ZServerIdInput)
    .output(ZDeleteServerOutput)
    .mutation(({ ctx, input }) => agents.deleteAgentServer(ctx, input.id)),
});

export const vpnRouter = router({ connections, servers: serverCatalogue });
