import { Migration } from '@mikro-orm/migrations';

/**
 * Custom domains are served only once verified by a TXT record (docs/sites.md, "Custom domains"). A domain set
 * before this migration becomes pending, with a token of its own: its site must verify it before the edge serves it
 * again. Only verified domains are unique across organizations; several sites may claim one while pending.
 */
export class Migration20261207000010_hosting_domain_verification extends Migration {
  override name = 'Migration20261207000010_hosting_domain_verification';

  override up(): void {
    this.addSql(`alter table "hosting_sites" add column "domain_verification_token" varchar(64) null;`);
    this.addSql(`alter table "hosting_sites" add column "domain_verified_at" timestamptz(3) null;`);
    this.addSql(
      `update "hosting_sites" set "domain_verification_token" = replace(gen_random_uuid()::text, '-', '') where "domain" is not null;`,
    );
    this.addSql(`drop index if exists "hosting_sites_domain_unique";`);
    this.addSql(`create index "hosting_sites_domain_index" on "hosting_sites" ("domain");`);
    this.addSql(
      `create unique index "hosting_sites_verified_domain_unique" on "hosting_sites" ("domain") where "domain_verified_at" is not null;`,
    );
  }
}
