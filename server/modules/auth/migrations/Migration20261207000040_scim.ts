import { Migration } from '@mikro-orm/migrations';

/**
 * SCIM provisioning (docs/sso.md, "SCIM provisioning"): the organization's one bearer token (stored as its SHA-256;
 * a new one replaces the row), and what the directory says of a user beyond the user row (`externalId`, the parts of
 * the name).
 */
export class Migration20261207000040_scim extends Migration {
  override name = 'Migration20261207000040_scim';

  override up(): void {
    this.addSql(`
      create table "scim_tokens" (
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "token_hash" varchar(64) not null,
        "created_by" varchar(64) not null,
        "created_at" timestamptz(3) not null,
        primary key ("organization_id")
      );`);
    this.addSql(`create unique index "scim_tokens_token_hash_unique" on "scim_tokens" ("token_hash");`);
    this.addSql(`
      create table "scim_users" (
        "user_id" varchar(64) not null references "users" ("id") on update cascade on delete cascade,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "external_id" varchar(512) null,
        "given_name" varchar(200) null,
        "family_name" varchar(200) null,
        "updated_at" timestamptz(3) not null,
        primary key ("user_id")
      );`);
    this.addSql(
      `create index "scim_users_organization_id_external_id_index" on "scim_users" ("organization_id", "external_id");`,
    );
  }
}
