import type { ModuleHttpRoute } from '../../kit/module.js';
import { agentPeers, agentRegister, agentReport, authenticateAgent } from './vpn-agents.service.js';

/**
 * The VPN agent's protocol under `/v1/agent` (docs/vpn-servers.md): JSON over HTTP(S), opened by the agent (outbound
 * only), authenticated by its server token alone (`Authorization: Bearer vst_…`; user tokens and API keys are
 * refused). Not procedures: not in the SDK nor the OpenAPI document, and not counted against any API quota.
 */
const json = (body: unknown, status = 200) => ({
  contentType: 'application/json; charset=utf-8',
  body: JSON.stringify(body),
  headers: { 'Cache-Control': 'no-store' },
  status,
});

export const vpnAgentRoutes: ModuleHttpRoute[] = [
  {
    method: 'POST',
    path: '/agent/register',
    async handler(deps, req) {
      const server = await authenticateAgent(deps, req.authorization);
      return json({ success: true, ...(await agentRegister(deps, server.id, req.body)) });
    },
  },
  {
    method: 'GET',
    path: '/agent/peers',
    async handler(deps, req) {
      const server = await authenticateAgent(deps, req.authorization);
      return json({ success: true, ...(await agentPeers(deps, server.id, req.query, req.signal)) });
    },
  },
  {
    method: 'POST',
    path: '/agent/report',
    async handler(deps, req) {
      const server = await authenticateAgent(deps, req.authorization);
      return json(await agentReport(deps, server.id, req.body));
    },
  },
];
