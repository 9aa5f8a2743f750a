import { Migration } from '@mikro-orm/migrations';

const MEMBER_DEFAULTS = ['vpn:read', 'database:read', 'hosting:read'];
const ADMIN_DEFAULTS = [
  ...['vpn', 'database', 'hosting', 'users'].flatMap((r) =>
    ['read', 'write', 'delete', 'admin'].map((l) => `${r}:${l}`),
  ),
  'billing:read',
];
const textArray = (list: string[]) => `array[${list.map((s) => `'${s}'`).join(', ')}]::text[]`;

export class Migration20261121000010_users extends Migration {
  override name = 'Migration20261121000010_users';

  override up(): void {
    // Deleted users keep their row (their id stays meaningful in events and history) but free their email.
    this.addSql(`drop index if exists "users_email_unique";`);
    this.addSql(`create unique index "users_email_unique" on "users" ("email") where "deleted_at" is null;`);
    this.addSql(`
      create index "users_organization_list_index" on "users" ("organization_id", "created_at" desc, "id" desc)
      where "deleted_at" is null;`);

    // `permissions` now holds the whole set rather than grants beyond the role's defaults: fold the defaults in.
    this.addSql(`
      update "users" set "permissions" = array(select distinct unnest("permissions" || ${textArray(MEMBER_DEFAULTS)}))
      where "role" = 'member';`);
    this.addSql(`
      update "users" set "permissions" = array(select distinct unnest("permissions" || ${textArray(ADMIN_DEFAULTS)}))
      where "role" = 'admin';`);

    this.addSql(`
      create table "user_invitations" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "user_id" varchar(64) not null references "users" ("id") on update cascade on delete cascade,
        "invited_by_id" varchar(64) null,
        "token_hash" varchar(64) not null,
        "expires_at" timestamptz(3) not null,
        "accepted_at" timestamptz(3) null,
        "revoked_at" timestamptz(3) null
      );`);
    this.addSql(
      `create unique index "user_invitations_token_hash_unique" on "user_invitations" ("token_hash");`,
    );
    this.addSql(`create index "user_invitations_user_id_index" on "user_invitations" ("user_id");`);
    this.addSql(
      `create index "user_invitations_organization_id_index" on "user_invitations" ("organization_id");`,
    );
  }
}
