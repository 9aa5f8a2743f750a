import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { URI, type TOTP } from 'otpauth';
import type { AppDeps } from '../../../server/kit/deps.js';
import { createUser, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { IDP_CERT } from '../../support/idp-certificate.js';
import type { TestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';
import { createConnection } from '../vpn/vpn-helpers.js';
import { dbName, runningDatabase, waitBackupCompleted } from '../databases/databases-helpers.js';
import { newDeployment, newSite, waitForDeployment } from '../hosting/hosting-helpers.js';
import { uniqueEmail } from '../../support/factories.js';

const query = <T extends object>(deps: AppDeps, sql: string, params: unknown[] = []) =>
  deps.db.orm.em.fork().execute<T[]>(sql, params);

/** Every table of the application with an organization column, from the database's catalogue. */
export async function tablesWithOrganizationColumn(deps: AppDeps): Promise<string[]> {
  const rows = await query<{ table_name: string }>(
    deps,
    `select c.table_name from information_schema.columns c
       join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name
      where c.table_schema = 'public' and c.column_name = 'organization_id' and t.table_type = 'BASE TABLE'
      order by c.table_name`,
  );
  return rows.map((r) => r.table_name);
}

/** Rows per table holding `organizationId` (the organizations row itself included), non-empty tables only. */
export async function rowsOf(deps: AppDeps, organizationId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const table of [...(await tablesWithOrganizationColumn(deps)), 'organizations']) {
    const column = table === 'organizations' ? 'id' : 'organization_id';
    const [row] = await query<{ n: number }>(
      deps,
      `select count(*)::int as n from "${table}" where "${column}" = ?`,
      [organizationId],
    );
    if (Number(row!.n) > 0) out[table] = Number(row!.n);
  }
  return out;
}

/** A digest of every row of the organization in every table with an organization column. */
export async function fingerprint(deps: AppDeps, organizationId: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const table of [...(await tablesWithOrganizationColumn(deps)), 'organizations']) {
    const column = table === 'organizations' ? 'id' : 'organization_id';
    const rows = await query<{ r: string }>(
      deps,
      `select t::text as r from "${table}" t where "${column}" = ? order by 1`,
      [organizationId],
    );
    out[table] = `${rows.length}:${createHash('sha256')
      .update(rows.map((x) => x.r).join('\n'))
      .digest('hex')}`;
  }
  return out;
}

/** Rows of the users of the organization in the tables keyed by user (no organization column). */
export async function userKeyedRows(deps: AppDeps, userIds: string[]): Promise<number> {
  let n = 0;
  for (const table of ['login_sessions', 'two_factor_credentials', 'recovery_codes', 'login_challenges']) {
    const [row] = await query<{ n: number }>(
      deps,
      `select count(*)::int as n from "${table}" where "user_id" = any(?::text[])`,
      [`{${userIds.join(',')}}`],
    );
    n += Number(row!.n);
  }
  return n;
}

/** Waits until the organization's row is gone (the removal job's last step). */
export async function waitRemoved(deps: AppDeps, organizationId: string, timeoutMs = 90_000): Promise<void> {
  await waitFor(
    "the organization's row to be gone",
    async () => {
      const rows = await query<{ id: string }>(deps, `select "id" from "organizations" where "id" = ?`, [
        organizationId,
      ]);
      return rows.length === 0 ? true : undefined;
    },
    { timeoutMs },
  );
}

/**
 * One of everything in `owner`'s organization: an active VPN connection, a site with a successful deployment, a
 * running database with a completed backup, a payment method and a paid plan change (invoice), a webhook (to
 * `hookUrl`) with deliveries, audit entries, an admin with two-factor on, an invited user. Returns the users.
 */
export async function populate(
  s: TestServer,
  owner: TestUser,
  hookUrl: string,
): Promise<{
  admin: TestUser;
  member: TestUser;
  invitedId: string;
  invitationToken: string;
  recoveryCode: string;
  connectionId: string;
}> {
  const base = s.baseUrl;
  const t = owner.token;
  const hook = await http(base, 'POST', '/v1/webhooks', {
    token: t,
    body: {
      url: hookUrl,
      events: [
        'vpn.connected',
        'vpn.disconnected',
        'billing.invoice.created',
        'billing.subscription.updated',
        'user.updated',
      ],
    },
  });
  expect(hook.status, hook.text).to.equal(201);
  const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
  const member = await createUser(s.deps, owner.organizationId);
  const invited = await http(base, 'POST', '/v1/users', {
    token: t,
    body: { email: uniqueEmail('invited'), name: 'Invited', role: 'member', send_invitation: false },
  });
  expect(invited.status, invited.text).to.equal(201);
  // Two-factor on for the admin.
  const caller = s.caller(admin.token);
  const setup = await caller.auth.twoFactor.setup({});
  const totp = URI.parse(setup.otpauth_url) as TOTP;
  const { recovery_codes } = await caller.auth.twoFactor.enable({
    password: admin.password,
    code: totp.generate(),
  });

  const conn = await createConnection(base, t);
  expect(conn.status, conn.text).to.equal(201);
  const connectionId = conn.body.connection.id as string;
  await waitFor('the connection to be active', async () => {
    const r = await http(base, 'GET', `/v1/vpn/connections/${connectionId}`, { token: t });
    return r.body.connection?.status === 'active' ? true : undefined;
  });

  // A real VPN server of the organization (docs/vpn-servers.md): its row and token go with the organization.
  const server = await http(base, 'POST', '/v1/vpn/servers', {
    token: t,
    body: {
      location: 'eu-central',
      city: 'Frankfurt',
      country: 'Germany',
      country_code: 'DE',
      host: 'vpn.doomed.example.net',
    },
  });
  expect(server.status, server.text).to.equal(201);

  const site = await newSite(base, t, { name: 'Everything' });
  const dep = await newDeployment(base, t, site.id);
  await waitForDeployment(base, t, site.id, dep.id, ['success']);

  const db = await runningDatabase(base, t, { name: dbName('all') });
  const backup = await http(base, 'POST', `/v1/databases/${db.id}/backups`, { token: t, body: {} });
  expect(backup.status, backup.text).to.equal(202);
  await waitBackupCompleted(base, t, db.id, backup.body.backup.id);

  const pm = await http(base, 'POST', '/v1/billing/payment-methods', {
    token: t,
    body: { payment_method: 'pm_card_visa' },
  });
  expect(pm.status, pm.text).to.equal(201);
  // Enterprise, for single sign-on and SCIM (docs/sso.md).
  const plan = await http(base, 'PUT', '/v1/billing/subscription', {
    token: t,
    body: { plan: 'enterprise' },
  });
  expect(plan.status, plan.text).to.equal(200);
  await populateSso(s, owner, member);
  return {
    admin,
    member,
    invitedId: invited.body.user.id as string,
    invitationToken: new URL(invited.body.invitation_url as string).searchParams.get('token')!,
    recoveryCode: recovery_codes[0]!,
    connectionId,
  };
}

/**
 * The organization's single sign-on and SCIM rows (docs/sso.md): a connection with a domain, a SCIM token and a user
 * SCIM made, made through the API; a sign-in under way, a one-time code and a remembered SAML assertion, which only
 * an identity provider's round trip makes, written directly.
 */
async function populateSso(s: TestServer, owner: TestUser, member: TestUser): Promise<void> {
  const t = owner.token;
  const organizationId = owner.organizationId;
  const tag = organizationId.slice(-10).toLowerCase();
  const sso = await http(s.baseUrl, 'PUT', '/v1/organization/sso', {
    token: t,
    body: {
      protocol: 'saml',
      idp_entity_id: 'https://idp.example.test/saml',
      idp_sso_url: 'https://idp.example.test/sso',
      idp_certificate: IDP_CERT,
      domains: [`doomed-${tag}.example.test`],
    },
  });
  expect(sso.status, sso.text).to.equal(200);
  const scim = await http(s.baseUrl, 'POST', '/v1/organization/scim-token', { token: t, body: {} });
  expect(scim.status, scim.text).to.equal(200);
  const scimToken = scim.body.scim.token as string;
  const provisioned = await http(s.baseUrl, 'POST', '/scim/v2/Users', {
    token: scimToken,
    body: {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
      userName: uniqueEmail('scim'),
      name: { givenName: 'Scim', familyName: 'Made' },
      externalId: `ext-${tag}`,
      active: true,
    },
  });
  expect(provisioned.status, provisioned.text).to.equal(201);
  const em = s.deps.db.orm.em.fork();
  const now = new Date();
  const later = new Date(now.getTime() + 600_000);
  const hash = (x: string) => createHash('sha256').update(x).digest('hex');
  await em.execute(
    `insert into sso_sign_ins (id, created_at, updated_at, organization_id, state_hash, protocol, request_id, expires_at)
     values (?, ?, ?, ?, ?, 'saml', ?, ?)`,
    [`ssi_${tag}`, now, now, organizationId, hash(`state-${tag}`), `_req-${tag}`, later],
  );
  await em.execute(
    `insert into sso_codes (id, created_at, updated_at, user_id, organization_id, code_hash, expires_at)
     values (?, ?, ?, ?, ?, ?, ?)`,
    [`ssc_${tag}`, now, now, member.id, organizationId, hash(`code-${tag}`), later],
  );
  await em.execute(
    `insert into sso_assertions (organization_id, assertion_id, expires_at, created_at) values (?, ?, ?, ?)`,
    [organizationId, `_assertion-${tag}`, later, now],
  );
}
