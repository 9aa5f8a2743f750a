import { Migration } from '@mikro-orm/migrations';

/** Sessions show when they were last used; password-reset tokens (docs/accounts-and-sessions.md, "Accounts and sessions"). */
export class Migration20261126000010_account_security extends Migration {
  override name = 'Migration20261126000010_account_security';

  override up(): void {
    this.addSql(`alter table "login_sessions" add column "last_used_at" timestamptz(3) null;`);
    this.addSql(`update "login_sessions" set "last_used_at" = "updated_at";`);
    this.addSql(`
      create table "password_reset_tokens" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "user_id" varchar(64) not null references "users" ("id") on update cascade on delete cascade,
        "token_hash" varchar(64) not null,
        "expires_at" timestamptz(3) not null,
        "used_at" timestamptz(3) null
      );`);
    this.addSql(
      `create unique index "password_reset_tokens_token_hash_unique" on "password_reset_tokens" ("token_hash");`,
    );
    this.addSql(`create index "password_reset_tokens_user_id_index" on "password_reset_tokens" ("user_id");`);
  }
}
