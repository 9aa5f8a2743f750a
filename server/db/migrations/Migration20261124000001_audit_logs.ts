import { Migration } from '@mikro-orm/migrations';

export class Migration20261124000001_audit_logs extends Migration {
  override name = 'Migration20261124000001_audit_logs';

  override up(): void {
    // Written by server/events/audit.ts; read by the audit module. No foreign keys: entries outlive what they name.
    this.addSql(`
      create table "audit_logs" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null,
        "actor_type" text check ("actor_type" in ('user', 'api_key')) not null,
        "actor_id" varchar(64) not null,
        "actor_email" varchar(320) null,
        "action" varchar(128) not null,
        "target_type" varchar(64) null,
        "target_id" varchar(64) null,
        "request_id" varchar(128) null,
        "ip" varchar(64) null,
        "user_agent" varchar(512) null,
        "status" int not null
      );`);
    this.addSql(
      `create index "audit_logs_organization_list_index" on "audit_logs" ("organization_id", "created_at", "id");`,
    );
    this.addSql(
      `create index "audit_logs_organization_actor_index" on "audit_logs" ("organization_id", "actor_id");`,
    );
    this.addSql(
      `create index "audit_logs_organization_target_index" on "audit_logs" ("organization_id", "target_id");`,
    );
    this.addSql(`create index "audit_logs_created_at_index" on "audit_logs" ("created_at");`);
  }
}
