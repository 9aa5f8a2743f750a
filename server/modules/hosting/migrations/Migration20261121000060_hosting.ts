import { Migration } from '@mikro-orm/migrations';

export class Migration20261121000060_hosting extends Migration {
  override name = 'Migration20261121000060_hosting';

  override up(): void {
    this.addSql(`
      create table "hosting_sites" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "user_id" varchar(64) not null references "users" ("id") on update cascade,
        "name" varchar(100) not null,
        "slug" varchar(63) not null,
        "domain" varchar(253) null,
        "git_repo" varchar(2048) not null,
        "branch" varchar(255) not null,
        "framework" text not null check ("framework" in ('react', 'nextjs', 'vue', 'angular')),
        "build_command" varchar(1000) not null,
        "output_directory" varchar(255) not null,
        "node_version" text not null check ("node_version" in ('18', '20', '22')),
        "environment_variables" json not null,
        "status" text not null default 'active' check ("status" in ('active')),
        "ssl_enabled" boolean not null default true,
        "live_deployment_id" varchar(64) null,
        "live_deployment_at" timestamptz(3) null,
        "preview_deployment_id" varchar(64) null,
        "live_since" timestamptz(3) null,
        "build_ticket" int not null default 0
      );`);
    this.addSql(`create unique index "hosting_sites_slug_unique" on "hosting_sites" ("slug");`);
    // A custom domain belongs to one site of the whole platform; deleting the site frees it.
    this.addSql(`create unique index "hosting_sites_domain_unique" on "hosting_sites" ("domain");`);
    this.addSql(
      `create index "hosting_sites_owner_index" on "hosting_sites" ("organization_id", "user_id", "created_at" desc, "id" desc);`,
    );
    this.addSql(
      `create index "hosting_sites_organization_index" on "hosting_sites" ("organization_id", "created_at" desc, "id" desc);`,
    );
    this.addSql(`create index "hosting_sites_user_id_index" on "hosting_sites" ("user_id");`);

    this.addSql(`
      create table "hosting_deployments" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "site_id" varchar(64) not null references "hosting_sites" ("id") on update cascade on delete cascade,
        "status" text not null default 'queued' check ("status" in ('queued', 'building', 'success', 'failed', 'canceled')),
        "branch" varchar(255) not null,
        "commit" varchar(40) not null,
        "message" varchar(500) null,
        "status_message" varchar(500) null,
        "git_repo" varchar(2048) not null,
        "framework" text not null check ("framework" in ('react', 'nextjs', 'vue', 'angular')),
        "build_command" varchar(1000) not null,
        "output_directory" varchar(255) not null,
        "node_version" text not null check ("node_version" in ('18', '20', '22')),
        "build_step" int not null default 0,
        "log_seq" int not null default 0,
        "started_at" timestamptz(3) null,
        "completed_at" timestamptz(3) null
      );`);
    this.addSql(
      `create index "hosting_deployments_site_id_index" on "hosting_deployments" ("site_id", "created_at" desc, "id" desc);`,
    );
    this.addSql(
      `create index "hosting_deployments_pending_index" on "hosting_deployments" ("site_id") where "status" in ('queued', 'building');`,
    );

    this.addSql(`
      create table "hosting_build_logs" (
        "deployment_id" varchar(64) not null references "hosting_deployments" ("id") on update cascade on delete cascade,
        "seq" int not null,
        "timestamp" timestamptz(3) not null,
        "stream" text not null check ("stream" in ('stdout', 'stderr')),
        "message" text not null,
        primary key ("deployment_id", "seq")
      );`);

    this.addSql(`
      create table "hosting_usage_records" (
        "resource_id" varchar(64) primary key,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "kind" text not null check ("kind" in ('build', 'site')),
        "site_id" varchar(64) not null,
        "started_at" timestamptz(3) not null,
        "ended_at" timestamptz(3) not null
      );`);
    this.addSql(
      `create index "hosting_usage_records_period_index" on "hosting_usage_records" ("organization_id", "ended_at");`,
    );
  }
}
