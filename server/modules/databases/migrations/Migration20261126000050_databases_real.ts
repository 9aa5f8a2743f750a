import { Migration } from '@mikro-orm/migrations';

/**
 * Real database servers (docs/databases.md, "Databases", Real servers): where a database lives (`server`, `port`; null for a
 * simulated one), whether its clients must use TLS, whether it is read-only (over its storage), why it `failed`;
 * why a backup failed.
 */
export class Migration20261126000050_databases_real extends Migration {
  override name = 'Migration20261126000050_databases_real';

  override up(): void {
    this.addSql(`
      alter table "databases"
        add column "server" varchar(200) null,
        add column "port" int null,
        add column "ssl_required" boolean not null default true,
        add column "read_only" boolean not null default false,
        add column "status_reason" varchar(500) null;`);
    this.addSql(`alter table "databases" drop constraint if exists "databases_status_check";`);
    this.addSql(
      `alter table "databases" add constraint "databases_status_check" check ("status" in ('creating', 'running', 'resizing', 'deleting', 'failed'));`,
    );
    this.addSql(`alter table "database_backups" add column "failure_reason" varchar(500) null;`);
  }
}
