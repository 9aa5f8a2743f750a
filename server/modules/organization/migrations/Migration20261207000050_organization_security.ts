import { Migration } from '@mikro-orm/migrations';

/**
 * The organization's security policy (docs/organization.md, "Security policies"): columns of its row, so that the
 * query that loads the caller on every request reads them with it (server/access/actor.ts).
 */
export class Migration20261207000050_organization_security extends Migration {
  override name = 'Migration20261207000050_organization_security';

  override up(): void {
    this.addSql(
      `alter table "organizations"
         add column "require_two_factor" boolean not null default false,
         add column "allowed_ip_ranges" text[] not null default '{}',
         add column "session_max_age" int null;`,
    );
  }
}
