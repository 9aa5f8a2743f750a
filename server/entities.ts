import { Organization } from './access/organization.entity.js';
import { User } from './access/user.entity.js';
import { LoginSession, LoginThrottle, RefreshToken } from './access/session.entity.js';
import { Event } from './events/event.entity.js';
import { BaseSchema } from './db/base.entity.js';
import { UserInvitation } from './modules/users/user-invitation.entity.js';
import { Webhook } from './modules/webhooks/webhook.entity.js';
import { WebhookDelivery } from './modules/webhooks/webhook-delivery.entity.js';
import { VpnConnection } from './modules/vpn/vpn-connection.entity.js';
import { VpnServer } from './modules/vpn/vpn-server.entity.js';

/** Every entity the ORM knows. Modules add theirs here. */
export const entities = [
  BaseSchema,
  Organization,
  User,
  LoginSession,
  RefreshToken,
  LoginThrottle,
  Event,
  UserInvitation,
  VpnServer,
  VpnConnection,
  Webhook,
  WebhookDelivery,
];
