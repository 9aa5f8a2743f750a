import pg from 'pg';
import type { BenchContext } from './plugin.js';

/**
 * A new organization on the enterprise plan (unlimited resources and API quota, as the bench organization), for a
 * bench whose data or plan changes must not reach the bench organization that the benches after it count on.
 * Registered through the API; the plan is set by SQL on the documented column (a plan change through the API would
 * need a card and issue invoices). `label` names it (`bench-<label>-…@example.test`).
 */
export async function ownEnterpriseOrganization(
  ctx: BenchContext,
  label: string,
): Promise<{ token: string; organizationId: string }> {
  const reg = await ctx.api<{ token: string; user: { organization_id: string } }>(
    'POST',
    '/v1/auth/register',
    {
      email: `bench-${label}-${Date.now()}@example.test`,
      password: `bench-${label}-password`,
      name: `Bench ${label}`,
      organization_name: `Bench ${label} organization`,
    },
  );
  if (reg.status !== 201) throw new Error(`registering answered ${reg.status}`);
  const organizationId = reg.body.user.organization_id;
  const client = new pg.Client({ connectionString: ctx.databaseUrl });
  await client.connect();
  try {
    await client.query(`update organizations set plan = 'enterprise' where id = $1`, [organizationId]);
  } finally {
    await client.end();
  }
  return { token: reg.body.token, organizationId };
}
