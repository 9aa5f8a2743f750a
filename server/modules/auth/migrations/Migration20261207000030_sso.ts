import { Migration } from '@mikro-orm/migrations';

/**
 * Single sign-on (docs/sso.md): an organization's connection to its identity provider, the domains that route
 * sign-ins to it, sign-ins in progress, the one-time codes they end with, the SAML assertions already accepted
 * (replay cache), and how each login session was opened (`method`).
 */
export class Migration20261207000030_sso extends Migration {
  override name = 'Migration20261207000030_sso';

  override up(): void {
    this.addSql(`
      create table "sso_connections" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "protocol" text not null check ("protocol" in ('oidc', 'saml')),
        "issuer" varchar(2048) null,
        "client_id" varchar(512) null,
        "client_secret" text null,
        "idp_entity_id" varchar(2048) null,
        "idp_sso_url" varchar(2048) null,
        "idp_certificate" text null,
        "default_role" text not null default 'member' check ("default_role" in ('admin', 'member')),
        "enforced" boolean not null default false
      );`);
    this.addSql(
      `create unique index "sso_connections_organization_id_unique" on "sso_connections" ("organization_id");`,
    );
    this.addSql(`
      create table "sso_domains" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "domain" varchar(253) not null,
        "token" varchar(64) not null,
        "verified_at" timestamptz(3) null
      );`);
    this.addSql(
      `create unique index "sso_domains_organization_id_domain_unique" on "sso_domains" ("organization_id", "domain");`,
    );
    // A verified domain belongs to one organization of the whole platform; pending claims do not count.
    this.addSql(
      `create unique index "sso_domains_verified_domain_unique" on "sso_domains" ("domain") where "verified_at" is not null;`,
    );
    this.addSql(`
      create table "sso_sign_ins" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "state_hash" varchar(64) not null,
        "protocol" text not null check ("protocol" in ('oidc', 'saml')),
        "nonce" varchar(128) null,
        "code_verifier" varchar(128) null,
        "return_to" varchar(2048) null,
        "request_id" varchar(256) null,
        "expires_at" timestamptz(3) not null,
        "used_at" timestamptz(3) null
      );`);
    this.addSql(`create index "sso_sign_ins_organization_id_index" on "sso_sign_ins" ("organization_id");`);
    this.addSql(`create unique index "sso_sign_ins_state_hash_unique" on "sso_sign_ins" ("state_hash");`);
    this.addSql(`create index "sso_sign_ins_expires_at_index" on "sso_sign_ins" ("expires_at");`);
    this.addSql(`
      create table "sso_codes" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "user_id" varchar(64) not null references "users" ("id") on update cascade on delete cascade,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "code_hash" varchar(64) not null,
        "expires_at" timestamptz(3) not null,
        "used_at" timestamptz(3) null
      );`);
    this.addSql(`create index "sso_codes_user_id_index" on "sso_codes" ("user_id");`);
    this.addSql(`create index "sso_codes_organization_id_index" on "sso_codes" ("organization_id");`);
    this.addSql(`create unique index "sso_codes_code_hash_unique" on "sso_codes" ("code_hash");`);
    this.addSql(`create index "sso_codes_expires_at_index" on "sso_codes" ("expires_at");`);
    this.addSql(`
      create table "sso_assertions" (
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "assertion_id" varchar(256) not null,
        "expires_at" timestamptz(3) not null,
        "created_at" timestamptz(3) not null,
        primary key ("organization_id", "assertion_id")
      );`);
    this.addSql(`create index "sso_assertions_expires_at_index" on "sso_assertions" ("expires_at");`);
    // How each login session was opened: 'password' (every session before this one) or 'sso'.
    this.addSql(`alter table "login_sessions" add column "method" varchar(16) not null default 'password';`);
  }
}
