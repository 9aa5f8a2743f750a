import { Migration } from '@mikro-orm/migrations';

export class Migration20261124000020_api_keys extends Migration {
  override name = 'Migration20261124000020_api_keys';

  override up(): void {
    this.addSql(`
      create table "api_keys" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "created_by_id" varchar(64) not null references "users" ("id") on update cascade on delete cascade,
        "name" varchar(100) not null,
        "prefix" varchar(16) not null,
        "secret_hash" varchar(64) not null,
        "permissions" text[] not null default '{}',
        "expires_at" timestamptz(3) not null,
        "last_used_at" timestamptz(3) null,
        "revoked_at" timestamptz(3) null
      );`);
    // The bearer lookup of every request made with a key.
    this.addSql(`create unique index "api_keys_secret_hash_unique" on "api_keys" ("secret_hash");`);
    this.addSql(
      `create index "api_keys_organization_list_index" on "api_keys" ("organization_id", "created_at" desc, "id" desc) where "revoked_at" is null;`,
    );
    this.addSql(`create index "api_keys_created_by_id_index" on "api_keys" ("created_by_id");`);
  }
}
