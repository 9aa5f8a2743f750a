import { defineEvent } from '../../events/define-event.js';
import { ZConnectionDetail, ZServer } from './vpn.schema.js';

export const vpnConnected = defineEvent('vpn.connected', ZConnectionDetail, {
  description: 'A VPN connection became `active`.',
});
export const vpnDisconnected = defineEvent('vpn.disconnected', ZConnectionDetail, {
  description: 'A VPN connection left `active` (disconnected, deleted, or its server left the catalogue).',
});
export const vpnServerCreated = defineEvent('vpn.server.created', ZServer, {
  description: 'A server joined the VPN catalogue (operator command); sent to every organization.',
  scope: 'platform',
});
export const vpnServerDeleted = defineEvent('vpn.server.deleted', ZServer, {
  description: 'A server left the VPN catalogue (operator command); sent to every organization.',
  scope: 'platform',
});
