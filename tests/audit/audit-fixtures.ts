import { URI, type TOTP } from 'otpauth';
import { dbName, runningDatabase } from '../modules/databases/databases-helpers.js';
import { GIT_REPO, waitForDeployment } from '../modules/hosting/hosting-helpers.js';
import { runDueBilling } from '../../server/modules/billing/renewals.js';
import { User } from '../../server/access/user.entity.js';
import { login } from '../../server/modules/auth/auth.service.js';
import { createPasswordResetToken } from '../../server/modules/auth/password-reset-mail.js';
import { sessionIdOf } from '../support/security-fixtures.js';
import { codeOnPage, ssoSignIn, ssoSignInSetUp } from '../modules/auth/sso-sign-in.fixtures.js';
import {
  SAML_TEST_CERT,
  samlConnectionWithDomain,
} from '../modules/auth/sso-connections.security-fixtures.js';
import { createInProcessContext } from '../../server/trpc/context.js';
import { newId } from '../../server/lib/ids.js';
import { WebhookDelivery } from '../../server/modules/webhooks/webhook-delivery.entity.js';
import { Webhook } from '../../server/modules/webhooks/webhook.entity.js';
import { HostingSite } from '../../server/modules/hosting/hosting-site.entity.js';
import { createUser, signedIn, uniqueEmail, type TestUser } from '../support/factories.js';
import type { FakeClock } from '../support/fake-clock.js';
import type { TestServer } from '../support/server.js';

/**
 * How each mutation succeeds, for the audit table (tests/audit/audit-table.test.ts): the caller's token and the
 * input, prepared in `owner`'s organization (enterprise plan). A new mutation fails the table until it has one.
 */
export interface AuditCall {
  /** The caller's access token; none for public procedures. */
  token?: string;
  input: unknown;
  /** The organization whose log gets the entry, when not the owner's (sign-up makes a new one). */
  organizationOf?: (output: unknown) => string;
  /** The target the entry must name. */
  target?: (output: unknown) => { type: string; id: string };
}

export type AuditFixture = (ctx: { s: TestServer; owner: TestUser; clock: FakeClock }) => Promise<AuditCall>;

const out = (o: unknown) => o as Record<string, Record<string, string>>;

async function connection(s: TestServer, owner: TestUser): Promise<string> {
  const { connection } = await s
    .caller(owner.token)
    .vpn.connections.create({ name: 'audited', location: 'eu-west', protocol: 'openvpn' });
  return connection.id;
}

/** A host name no other server uses (host and port are unique in the catalogue). */
const agentHost = () => `audited-${Math.random().toString(36).slice(2, 10)}.example.net`;

async function site(s: TestServer, owner: TestUser): Promise<string> {
  const { site } = await s
    .caller(owner.token)
    .hosting.sites.create({ name: 'Audited site', git_repo: GIT_REPO, framework: 'react' });
  return site.id;
}

/** A deployment of `siteId` that finished with `success`. */
async function builtDeployment(s: TestServer, owner: TestUser, siteId: string): Promise<string> {
  const { deployment } = await s.caller(owner.token).hosting.sites.deploy({ id: siteId });
  await waitForDeployment(s.baseUrl, owner.token, siteId, deployment.id, ['success']);
  return deployment.id;
}

async function runningDb(s: TestServer, owner: TestUser): Promise<string> {
  const database = await runningDatabase(s.baseUrl, owner.token, { name: dbName('audit') });
  return database.id as string;
}

async function webhook(s: TestServer, owner: TestUser): Promise<string> {
  const { webhook } = await s
    .caller(owner.token)
    .webhooks.create({ url: 'https://example.com/audited', events: ['user.created'] });
  return webhook.id;
}

/** A failed delivery of webhook `id`, created now (what redeliver and recover act on). */
async function failedDelivery(s: TestServer, owner: TestUser, id: string, at: Date): Promise<string> {
  const em = s.deps.db.orm.em.fork();
  const eventId = newId('evt');
  const delivery = em.create(WebhookDelivery, {
    id: newId('del'),
    webhook: em.getReference(Webhook, id),
    organizationId: owner.organizationId,
    eventId,
    eventType: 'user.created',
    payload: JSON.stringify({ id: eventId, type: 'user.created', data: { object: {} } }),
    status: 'failed',
    attempts: 1,
    fairAt: at,
    createdAt: at,
    updatedAt: at,
  });
  await em.flush();
  return delivery.id;
}

/** Two-factor on for `owner`; returns the authenticator (the clock moves past the step used to enable). */
async function twoFactorOn(s: TestServer, owner: TestUser, clock: FakeClock): Promise<TOTP> {
  const caller = s.caller(owner.token);
  const setup = await caller.auth.twoFactor.setup({});
  const authenticator = URI.parse(setup.otpauth_url) as TOTP;
  await caller.auth.twoFactor.enable({
    password: owner.password,
    code: authenticator.generate({ timestamp: clock.now().getTime() }),
  });
  clock.advance(30_000);
  return authenticator;
}

export const auditFixtures: Record<string, AuditFixture> = {
  // Authentication
  'auth.login': async ({ owner }) => ({ input: { email: owner.email, password: owner.password } }),
  'auth.register': async () => ({
    input: {
      email: uniqueEmail('signup'),
      password: 'a-good-password',
      name: 'New',
      organization_name: 'New Co',
    },
    organizationOf: (o) => out(o).user!.organization_id!,
  }),
  'auth.refresh': async ({ owner }) => ({ input: { refresh_token: owner.refreshToken } }),
  'auth.logout': async ({ owner }) => ({ token: owner.token, input: {} }),
  'auth.twoFactor.setup': async ({ owner }) => ({ token: owner.token, input: {} }),
  'auth.twoFactor.enable': async ({ s, owner, clock }) => {
    const setup = await s.caller(owner.token).auth.twoFactor.setup({});
    const code = (URI.parse(setup.otpauth_url) as TOTP).generate({ timestamp: clock.now().getTime() });
    return { token: owner.token, input: { password: owner.password, code } };
  },
  'auth.twoFactor.disable': async ({ s, owner, clock }) => {
    const authenticator = await twoFactorOn(s, owner, clock);
    return {
      token: owner.token,
      input: { password: owner.password, code: authenticator.generate({ timestamp: clock.now().getTime() }) },
    };
  },
  'auth.twoFactor.verify': async ({ s, owner, clock }) => {
    const authenticator = await twoFactorOn(s, owner, clock);
    const login = await s.caller().auth.login({ email: owner.email, password: owner.password });
    if (!('challenge_token' in login)) throw new Error('expected a challenge');
    return {
      input: {
        challenge_token: login.challenge_token,
        code: authenticator.generate({ timestamp: clock.now().getTime() }),
      },
    };
  },

  'auth.password.change': async ({ owner }) => ({
    token: owner.token,
    input: { current_password: owner.password, new_password: 'a-new-good-password' },
  }),
  'auth.password.requestReset': async ({ owner }) => ({ input: { email: owner.email } }),
  'auth.password.confirmReset': async ({ s, owner, clock }) => {
    const em = s.deps.db.orm.em.fork();
    const user = await em.findOneOrFail(User, owner.id);
    const token = createPasswordResetToken(s.deps, em, user, clock.now(), 60_000);
    await em.flush();
    return { input: { token, new_password: 'a-new-good-password' } };
  },
  'auth.sessions.revoke': async ({ s, owner }) => {
    const second = signedIn(
      await login(createInProcessContext(s.deps), { email: owner.email, password: owner.password }),
    );
    const id = sessionIdOf(second.token);
    return { token: owner.token, input: { id }, target: () => ({ type: 'login_session', id }) };
  },
  'auth.sessions.revokeAll': async ({ owner }) => ({ token: owner.token, input: { keep_current: true } }),
  // Single sign-on: the owner's address of a verified domain (the entry names the organization's user of it)
  'sso.start': async ({ s, owner }) => {
    const { domain } = await ssoSignInSetUp(s.deps, owner.organizationId);
    const email = `owner@${domain}`;
    await s.deps.db.orm.em.fork().execute('update users set email = ? where id = ?', [email, owner.id]);
    return { input: { email } };
  },
  'sso.token': async ({ s, owner }) => {
    const { domain } = await ssoSignInSetUp(s.deps, owner.organizationId);
    return { input: { code: codeOnPage(await ssoSignIn(s.deps, `audited@${domain}`)) } };
  },

  // Users
  'users.create': async ({ owner }) => ({
    token: owner.token,
    input: { email: uniqueEmail('invitee'), name: 'Invitee', role: 'member', send_invitation: false },
    target: (o) => ({ type: 'user', id: out(o).user!.id! }),
  }),
  'users.update': async ({ s, owner }) => {
    const member = await createUser(s.deps, owner.organizationId);
    return {
      token: owner.token,
      input: { id: member.id, name: 'Renamed' },
      target: () => ({ type: 'user', id: member.id }),
    };
  },
  'users.delete': async ({ s, owner }) => {
    const member = await createUser(s.deps, owner.organizationId);
    return { token: owner.token, input: { id: member.id }, target: () => ({ type: 'user', id: member.id }) };
  },
  'users.updatePermissions': async ({ s, owner }) => {
    const member = await createUser(s.deps, owner.organizationId);
    return {
      token: owner.token,
      input: { id: member.id, permissions: { vpn: { read: true, write: true, delete: false } } },
    };
  },
  'users.acceptInvitation': async ({ s, owner }) => {
    const invited = await s.caller(owner.token).users.create({
      email: uniqueEmail('accept'),
      name: 'Accepting',
      role: 'member',
      send_invitation: false,
    });
    const token = new URL(invited.invitation_url!).searchParams.get('token')!;
    return { input: { token, password: 'a-good-password' } };
  },

  // VPN
  'vpn.connections.create': async ({ owner }) => ({
    token: owner.token,
    input: { name: 'new', location: 'eu-west', protocol: 'openvpn' },
    target: (o) => ({ type: 'vpn_connection', id: out(o).connection!.id! }),
  }),
  'vpn.connections.update': async ({ s, owner }) => {
    const id = await connection(s, owner);
    return {
      token: owner.token,
      input: { id, name: 'renamed' },
      target: () => ({ type: 'vpn_connection', id }),
    };
  },
  'vpn.connections.delete': async ({ s, owner }) => {
    const id = await connection(s, owner);
    return { token: owner.token, input: { id }, target: () => ({ type: 'vpn_connection', id }) };
  },
  'vpn.servers.create': async ({ owner }) => ({
    token: owner.token,
    input: { location: 'eu-west', city: 'Dublin', country: 'Ireland', country_code: 'IE', host: agentHost() },
    target: (o) => ({ type: 'vpn_server', id: out(o).server!.id! }),
  }),
  'vpn.servers.delete': async ({ s, owner }) => {
    const { server } = await s.caller(owner.token).vpn.servers.create({
      location: 'eu-west',
      city: 'Dublin',
      country: 'Ireland',
      country_code: 'IE',
      host: agentHost(),
    });
    return {
      token: owner.token,
      input: { id: server.id },
      target: () => ({ type: 'vpn_server', id: server.id }),
    };
  },

  // Hosting
  'hosting.sites.create': async ({ owner }) => ({
    token: owner.token,
    input: { name: 'New site', git_repo: GIT_REPO, framework: 'vue' },
    target: (o) => ({ type: 'site', id: out(o).site!.id! }),
  }),
  'hosting.sites.update': async ({ s, owner }) => {
    const id = await site(s, owner);
    return { token: owner.token, input: { id, branch: 'release' }, target: () => ({ type: 'site', id }) };
  },
  'hosting.sites.delete': async ({ s, owner }) => {
    const id = await site(s, owner);
    return { token: owner.token, input: { id }, target: () => ({ type: 'site', id }) };
  },
  'hosting.sites.verifyDomain': async ({ s, owner }) => {
    // A domain whose record was already found: the verify answers 200 without a DNS lookup (the server of this
    // table has no DNS server of its own; tests/modules/hosting/hosting.domains.test.ts runs the lookups).
    const { site } = await s.caller(owner.token).hosting.sites.create({
      name: 'Audited domain',
      git_repo: GIT_REPO,
      framework: 'vue',
      domain: `audited-${Math.random().toString(36).slice(2, 10)}.example`,
    });
    await s.deps.db.orm.em
      .fork()
      .nativeUpdate(HostingSite, { id: site.id }, { domainVerifiedAt: new Date() });
    return { token: owner.token, input: { id: site.id }, target: () => ({ type: 'site', id: site.id }) };
  },
  'hosting.sites.deploy': async ({ s, owner }) => {
    const id = await site(s, owner);
    return {
      token: owner.token,
      input: { id, message: 'Audited deploy' },
      target: () => ({ type: 'site', id }),
    };
  },
  'hosting.sites.rollback': async ({ s, owner }) => {
    const id = await site(s, owner);
    const first = await builtDeployment(s, owner, id);
    await builtDeployment(s, owner, id);
    return { token: owner.token, input: { id, deployment_id: first }, target: () => ({ type: 'site', id }) };
  },
  'hosting.deployments.cancel': async ({ s, owner }) => {
    const id = await site(s, owner);
    const { deployment } = await s.caller(owner.token).hosting.sites.deploy({ id });
    return {
      token: owner.token,
      input: { id, deployment_id: deployment.id },
      target: () => ({ type: 'deployment', id: deployment.id }),
    };
  },

  // Databases
  'databases.create': async ({ owner }) => ({
    token: owner.token,
    input: { name: dbName('audit'), engine: 'postgresql' },
    target: (o) => ({ type: 'database', id: out(o).database!.id! }),
  }),
  'databases.update': async ({ s, owner }) => {
    const id = await runningDb(s, owner);
    return {
      token: owner.token,
      input: { id, backup_retention: 10 },
      target: () => ({ type: 'database', id }),
    };
  },
  'databases.delete': async ({ s, owner }) => {
    const id = await runningDb(s, owner);
    return { token: owner.token, input: { id }, target: () => ({ type: 'database', id }) };
  },
  'databases.cancelDeletion': async ({ s, owner }) => {
    const id = await runningDb(s, owner);
    await s.caller(owner.token).databases.delete({ id });
    return { token: owner.token, input: { id }, target: () => ({ type: 'database', id }) };
  },
  'databases.resetPassword': async ({ s, owner }) => {
    const id = await runningDb(s, owner);
    return { token: owner.token, input: { id }, target: () => ({ type: 'database', id }) };
  },
  'databases.backups.create': async ({ s, owner }) => {
    const id = await runningDb(s, owner);
    return { token: owner.token, input: { id, name: 'audited' }, target: () => ({ type: 'database', id }) };
  },

  // Billing
  'billing.paymentMethods.create': async ({ owner }) => ({
    token: owner.token,
    input: { payment_method: 'pm_card_visa' },
    target: (o) => ({ type: 'payment_method', id: out(o).payment_method!.id! }),
  }),
  'billing.paymentMethods.delete': async ({ s, owner }) => {
    const caller = s.caller(owner.token);
    await caller.billing.paymentMethods.create({ payment_method: 'pm_card_visa' });
    const { payment_method } = await caller.billing.paymentMethods.create({ payment_method: 'pm_card_amex' });
    return {
      token: owner.token,
      input: { id: payment_method.id },
      target: () => ({ type: 'payment_method', id: payment_method.id }),
    };
  },
  'billing.subscription.preview': async ({ owner }) => ({
    token: owner.token,
    input: { plan: 'enterprise' },
  }),
  'billing.subscription.update': async ({ s, owner }) => {
    await s.caller(owner.token).billing.paymentMethods.create({ payment_method: 'pm_card_visa' });
    return { token: owner.token, input: { cancel_at_period_end: true } };
  },
  'billing.invoices.pay': async ({ s, owner, clock }) => {
    // An open invoice: the renewal was declined by the default card; then a good card becomes the default
    // without the API's immediate retry (set in the database), so that the payment is the call under test.
    await s.caller(owner.token).billing.paymentMethods.create({ payment_method: 'pm_card_chargeDeclined' });
    clock.advance(32 * 86_400_000);
    await runDueBilling(s.deps);
    const token = signedIn(await login(createInProcessContext(s.deps), owner)).token;
    const caller = s.caller(token);
    const [open] = (await caller.billing.invoices.list({ status: 'open' })).invoices;
    if (!open?.id) throw new Error('expected an open invoice');
    const invoiceId = open.id;
    const { payment_method } = await caller.billing.paymentMethods.create({ payment_method: 'pm_card_visa' });
    const em = s.deps.db.orm.em.fork();
    await em.execute('update payment_methods set is_default = false where organization_id = ?', [
      owner.organizationId,
    ]);
    await em.execute('update payment_methods set is_default = true where id = ?', [payment_method.id]);
    return { token, input: { id: invoiceId }, target: () => ({ type: 'invoice', id: invoiceId }) };
  },

  // Webhooks
  'webhooks.create': async ({ owner }) => ({
    token: owner.token,
    input: { url: 'https://example.com/new', events: ['user.created'] },
    target: (o) => ({ type: 'webhook', id: out(o).webhook!.id! }),
  }),
  'webhooks.update': async ({ s, owner }) => {
    const id = await webhook(s, owner);
    return { token: owner.token, input: { id, active: false }, target: () => ({ type: 'webhook', id }) };
  },
  'webhooks.delete': async ({ s, owner }) => {
    const id = await webhook(s, owner);
    return { token: owner.token, input: { id }, target: () => ({ type: 'webhook', id }) };
  },
  'webhooks.test': async ({ s, owner }) => {
    const id = await webhook(s, owner);
    return { token: owner.token, input: { id }, target: () => ({ type: 'webhook', id }) };
  },
  'webhooks.redeliver': async ({ s, owner, clock }) => {
    const id = await webhook(s, owner);
    const delivery_id = await failedDelivery(s, owner, id, clock.now());
    return {
      token: owner.token,
      input: { id, delivery_id },
      target: () => ({ type: 'webhook_delivery', id: delivery_id }),
    };
  },
  'webhooks.recover': async ({ s, owner, clock }) => {
    const id = await webhook(s, owner);
    const since = new Date(clock.now().getTime() - 60_000);
    await failedDelivery(s, owner, id, clock.now());
    return {
      token: owner.token,
      input: { id, since: since.toISOString() },
      target: () => ({ type: 'webhook', id }),
    };
  },
  'webhooks.rotateSecret': async ({ s, owner }) => {
    const id = await webhook(s, owner);
    return { token: owner.token, input: { id }, target: () => ({ type: 'webhook', id }) };
  },
  // Organization
  'organization.update': async ({ owner }) => ({
    token: owner.token,
    input: { name: 'Renamed organization' },
  }),
  'organization.transferOwnership': async ({ s, owner }) => {
    const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
    return { token: owner.token, input: { user_id: admin.id, password: owner.password } };
  },
  'organization.delete': async ({ s, owner }) => {
    const { organization } = await s.caller(owner.token).organization.get({});
    return { token: owner.token, input: { confirm: organization.name, password: owner.password } };
  },
  // The security policy: a change that keeps the in-process caller's own address (127.0.0.1) allowed
  'organization.security.set': async ({ owner }) => ({
    token: owner.token,
    input: { allowed_ip_ranges: ['127.0.0.0/8'], session_max_age: 86_400 },
  }),

  // Single sign-on: a SAML connection from the IdP's three fields (nothing to fetch)
  'sso.set': async ({ owner }) => ({
    token: owner.token,
    input: {
      protocol: 'saml',
      idp_entity_id: 'urn:audited:idp',
      idp_sso_url: 'https://idp.audited.example/sso',
      idp_certificate: SAML_TEST_CERT,
    },
  }),
  'sso.delete': async ({ s, owner }) => {
    await samlConnectionWithDomain(s, owner.token);
    return { token: owner.token, input: {} };
  },
  'sso.verifyDomain': async ({ s, owner }) => {
    // A domain whose record was already found: the verify answers 200 without a DNS lookup (this table's server has
    // no DNS server of its own; tests/modules/auth/sso-connections.test.ts runs the lookups).
    const domain = await samlConnectionWithDomain(s, owner.token, { verified: true });
    return { token: owner.token, input: { domain } };
  },
  // SCIM provisioning's token (its SCIM requests are audited as users.*: tests/modules/auth/scim.test.ts)
  'sso.scimToken': async ({ owner }) => ({ token: owner.token, input: {} }),

  // API keys
  'apiKeys.create': async ({ owner }) => ({
    token: owner.token,
    input: { name: 'audited key', permissions: ['vpn:read'] },
    target: (o) => ({ type: 'api_key', id: out(o).api_key!.id! }),
  }),
  'apiKeys.revoke': async ({ s, owner }) => {
    const { api_key } = await s
      .caller(owner.token)
      .apiKeys.create({ name: 'to revoke', permissions: ['vpn:read'] });
    return {
      token: owner.token,
      input: { id: api_key.id },
      target: () => ({ type: 'api_key', id: api_key.id }),
    };
  },
};
