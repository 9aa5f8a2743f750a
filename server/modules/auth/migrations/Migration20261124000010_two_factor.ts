import { Migration } from '@mikro-orm/migrations';

export class Migration20261124000010_two_factor extends Migration {
  override name = 'Migration20261124000010_two_factor';

  override up(): void {
    this.addSql(`
      create table "two_factor_credentials" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "user_id" varchar(64) not null references "users" ("id") on update cascade on delete cascade,
        "secret" text null,
        "pending_secret" text null,
        "last_step" bigint null,
        "enabled_at" timestamptz(3) null
      );`);
    this.addSql(
      `create unique index "two_factor_credentials_user_id_unique" on "two_factor_credentials" ("user_id");`,
    );
    this.addSql(`
      create table "recovery_codes" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "user_id" varchar(64) not null references "users" ("id") on update cascade on delete cascade,
        "code_hash" varchar(64) not null,
        "used_at" timestamptz(3) null
      );`);
    this.addSql(`create index "recovery_codes_user_id_index" on "recovery_codes" ("user_id");`);
    this.addSql(`
      create table "login_challenges" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "user_id" varchar(64) not null references "users" ("id") on update cascade on delete cascade,
        "token_hash" varchar(64) not null,
        "expires_at" timestamptz(3) not null,
        "failures" int not null default 0,
        "closed_at" timestamptz(3) null
      );`);
    this.addSql(
      `create unique index "login_challenges_token_hash_unique" on "login_challenges" ("token_hash");`,
    );
    this.addSql(`create index "login_challenges_user_id_index" on "login_challenges" ("user_id");`);
  }
}
