/** Every event name a webhook may subscribe to (docs/webhooks.md, "Webhooks" and "Hosting"). */
export const EVENT_TYPES = [
  'user.created',
  'user.updated',
  'user.deleted',
  'user.login',
  'organization.updated',
  'vpn.connected',
  'vpn.disconnected',
  'vpn.server.created',
  'vpn.server.deleted',
  'database.created',
  'database.updated',
  'database.deleted',
  'database.backup.completed',
  'billing.invoice.created',
  'billing.invoice.paid',
  'billing.invoice.failed',
  'billing.subscription.updated',
  'hosting.deployment.succeeded',
  'hosting.deployment.failed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];
