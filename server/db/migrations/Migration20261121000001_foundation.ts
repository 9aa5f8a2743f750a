import { Migration } from '@mikro-orm/migrations';

export class Migration20261121000001_foundation extends Migration {
  override name = 'Migration20261121000001_foundation';

  override up(): void {
    this.addSql(`
      create table "organizations" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "name" varchar(200) not null,
        "plan" text not null default 'starter' check ("plan" in ('starter', 'pro', 'enterprise'))
      );`);
    this.addSql(`
      create table "users" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade,
        "email" varchar(320) not null,
        "name" varchar(200) not null,
        "password_hash" varchar(255) null,
        "role" text not null check ("role" in ('owner', 'admin', 'member')),
        "status" text not null default 'active' check ("status" in ('invited', 'active', 'suspended')),
        "permissions" text[] not null default '{}',
        "two_factor_enabled" boolean not null default false,
        "last_login" timestamptz(3) null,
        "avatar_url" varchar(2048) null,
        "timezone" varchar(64) null,
        "language" varchar(16) null,
        "deleted_at" timestamptz(3) null
      );`);
    this.addSql(`create unique index "users_email_unique" on "users" ("email");`);
    this.addSql(`create index "users_organization_id_index" on "users" ("organization_id", "created_at");`);
    this.addSql(`
      create table "login_sessions" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "user_id" varchar(64) not null references "users" ("id") on update cascade on delete cascade,
        "expires_at" timestamptz(3) not null,
        "revoked_at" timestamptz(3) null,
        "ip" varchar(64) null,
        "user_agent" varchar(512) null
      );`);
    this.addSql(`create index "login_sessions_user_id_index" on "login_sessions" ("user_id");`);
    this.addSql(`create index "login_sessions_expires_at_index" on "login_sessions" ("expires_at");`);
    this.addSql(`
      create table "refresh_tokens" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "session_id" varchar(64) not null references "login_sessions" ("id") on update cascade on delete cascade,
        "token_hash" varchar(64) not null,
        "expires_at" timestamptz(3) not null,
        "used_at" timestamptz(3) null
      );`);
    this.addSql(`create unique index "refresh_tokens_token_hash_unique" on "refresh_tokens" ("token_hash");`);
    this.addSql(`create index "refresh_tokens_session_id_index" on "refresh_tokens" ("session_id");`);
    this.addSql(`
      create table "login_throttles" (
        "key" varchar(128) primary key,
        "failures" int not null default 0,
        "window_started_at" timestamptz(3) not null,
        "locked_until" timestamptz(3) null
      );`);
    this.addSql(`
      create table "events" (
        "id" varchar(64) primary key,
        "organization_id" varchar(64) not null,
        "type" varchar(64) not null,
        "data" jsonb not null,
        "created_at" timestamptz(3) not null,
        "dispatched_at" timestamptz(3) null
      );`);
    this.addSql(`create index "events_organization_id_index" on "events" ("organization_id", "created_at");`);
    this.addSql(
      `create index "events_undispatched_index" on "events" ("created_at") where "dispatched_at" is null;`,
    );
  }
}
