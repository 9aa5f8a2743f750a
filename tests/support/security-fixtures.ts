/**
 * Security fixtures: what the security table (tests/support/security-table.ts, run by
 * tests/security-table.test.ts) needs to know about procedures beyond their meta.
 *
 * The table goes through EVERY procedure of `appRouter` and checks, from the meta set by the base procedures:
 * no token → 401; a member without the required permission (or role) → 403; an id of another organization → 404
 * (and a malformed id → 404). For the last two it needs a resource of ANOTHER organization, which is what an
 * entry here provides. Every procedure whose REST path has a parameter (`/vpn/connections/{id}`) must have one,
 * or the table fails and names it.
 *
 * Adding an entry: key it by the procedure's tRPC path, create the resource as the other organization, return the
 * complete input to call the procedure with (path id plus any body fields validation requires, so that the only
 * reason left to fail is the foreign id):
 *
 * ```ts
 *   'vpn.update': async ({ s, other }) => {
 *     const { connection } = await s.caller(other.token).vpn.create({ name: 'x', location: 'eu-west', protocol: 'wireguard' });
 *     return { id: connection.id, name: 'renamed' };
 *   },
 * ```
 *
 * `other` is the logged-in owner of a fresh organization on the `enterprise` plan (no plan limit in the way);
 * `s` is the shared test server (`s.deps`, `s.caller(token)`). For a path id that is not tenant data (a global
 * catalogue), return `notTenantScoped('why')` instead.
 *
 * Public procedures (no token needed) must be listed in PUBLIC_PROCEDURES with the reason; anything else without a
 * token requirement fails the table.
 */
import { databasesSecurityFixtures } from '../modules/databases/databases.security-fixtures.js';
import { billingSecurityFixtures } from '../modules/billing/billing.security-fixtures.js';
import type { TestUser } from './factories.js';
import { createUser } from './factories.js';
import type { TestServer } from './server.js';
import { newId } from '../../server/lib/ids.js';
import { WebhookDelivery } from '../../server/modules/webhooks/webhook-delivery.entity.js';
import { Webhook } from '../../server/modules/webhooks/webhook.entity.js';
import { apiKeysSecurityFixtures } from '../modules/api-keys/api-keys.security-fixtures.js';
import { hostingSecurityFixtures } from '../modules/hosting/hosting.security-fixtures.js';
import { ssoConnectionsSecurityFixtures } from '../modules/auth/sso-connections.security-fixtures.js';

export interface FixtureContext {
  s: TestServer;
  /** Owner of another organization (enterprise plan), logged in. */
  other: TestUser;
}

export interface NotTenantScoped {
  notTenantScoped: string;
}
export const notTenantScoped = (reason: string): NotTenantScoped => ({ notTenantScoped: reason });

export type SecurityFixture = (ctx: FixtureContext) => Promise<Record<string, unknown> | NotTenantScoped>;

/** Procedures anyone may call without a token (docs/getting-started.md, "Calling the API"), with the reason. */
export const PUBLIC_PROCEDURES: Record<string, string> = {
  'auth.login': 'obtains a token',
  'auth.register': 'creates an organization and its owner',
  'auth.refresh': 'exchanges a refresh token',
  'users.acceptInvitation': 'the invited user has no token yet',
  'auth.twoFactor.verify': 'completes a sign-in: the challenge token stands for the password',
  'auth.password.requestReset': 'a forgotten password: the mailed link stands for it',
  'auth.password.confirmReset': 'a forgotten password: the mailed token stands for it',
  'sso.start': 'starts a single sign-on: the identity provider authenticates the person',
  'sso.token': 'completes a single sign-on: the one-time code stands for the identity provider’s sign-in',
};

/** The login session (`sid`) of an access token. */
export function sessionIdOf(token: string): string {
  return (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { sid: string }).sid;
}

export const securityFixtures: Record<string, SecurityFixture> = {
  // Authentication: another user's login session is not found
  'auth.sessions.revoke': async ({ other }) => ({ id: sessionIdOf(other.token) }),

  // Users
  'users.get': async ({ other }) => ({ id: other.id }),
  'users.update': async ({ s, other }) => {
    const member = await createUser(s.deps, other.organizationId);
    return { id: member.id, name: 'Renamed' };
  },
  'users.delete': async ({ s, other }) => {
    const member = await createUser(s.deps, other.organizationId);
    return { id: member.id };
  },
  'users.getPermissions': async ({ other }) => ({ id: other.id }),
  'users.updatePermissions': async ({ s, other }) => {
    const member = await createUser(s.deps, other.organizationId);
    return { id: member.id, permissions: { vpn: { write: true } } };
  },

  // VPN
  'vpn.connections.get': async ({ s, other }) => ({ id: await otherOrgConnection(s, other) }),
  'vpn.connections.update': async ({ s, other }) => ({
    id: await otherOrgConnection(s, other),
    name: 'Renamed',
  }),
  'vpn.connections.delete': async ({ s, other }) => ({ id: await otherOrgConnection(s, other) }),
  'vpn.servers.delete': async ({ s, other }) => {
    const { server } = await s.caller(other.token).vpn.servers.create({
      location: 'eu-west',
      city: 'Dublin',
      country: 'Ireland',
      country_code: 'IE',
      host: `agent-${Math.random().toString(36).slice(2, 10)}.example.net`,
    });
    return { id: server.id };
  },

  // Webhooks
  'webhooks.get': async ({ s, other }) => ({ id: await otherOrgWebhook(s, other) }),
  'webhooks.update': async ({ s, other }) => ({ id: await otherOrgWebhook(s, other), active: false }),
  'webhooks.delete': async ({ s, other }) => ({ id: await otherOrgWebhook(s, other) }),
  'webhooks.deliveries': async ({ s, other }) => ({ id: await otherOrgWebhook(s, other) }),
  'webhooks.test': async ({ s, other }) => ({ id: await otherOrgWebhook(s, other) }),
  'webhooks.redeliver': async ({ s, other }) => {
    const id = await otherOrgWebhook(s, other);
    return { id, delivery_id: await otherOrgDelivery(s, other, id) };
  },
  'webhooks.recover': async ({ s, other }) => ({
    id: await otherOrgWebhook(s, other),
    since: new Date(Date.now() - 60_000).toISOString(),
  }),
  'webhooks.rotateSecret': async ({ s, other }) => ({ id: await otherOrgWebhook(s, other) }),

  ...hostingSecurityFixtures,
  ...databasesSecurityFixtures,
  ...billingSecurityFixtures,
  ...apiKeysSecurityFixtures,
  ...ssoConnectionsSecurityFixtures,
};

async function otherOrgConnection(s: TestServer, other: TestUser): Promise<string> {
  const { connection } = await s
    .caller(other.token)
    .vpn.connections.create({ name: 'Other org', location: 'eu-west', protocol: 'wireguard' });
  return connection.id;
}

async function otherOrgWebhook(s: TestServer, other: TestUser): Promise<string> {
  const { webhook } = await s
    .caller(other.token)
    .webhooks.create({ url: 'https://hooks.example.com/other', events: ['user.created'] });
  return webhook.id;
}

/** A failed delivery of another organization's webhook, written as the worker leaves one. */
async function otherOrgDelivery(s: TestServer, other: TestUser, webhookId: string): Promise<string> {
  const em = s.deps.db.orm.em.fork();
  const now = new Date();
  const eventId = newId('evt');
  const delivery = em.create(WebhookDelivery, {
    id: newId('del'),
    webhook: em.getReference(Webhook, webhookId),
    organizationId: other.organizationId,
    eventId,
    eventType: 'user.created',
    payload: JSON.stringify({ id: eventId, type: 'user.created', data: { object: {} } }),
    status: 'failed',
    attempts: 1,
    fairAt: now,
    createdAt: now,
    updatedAt: now,
  });
  await em.flush();
  return delivery.id;
}
