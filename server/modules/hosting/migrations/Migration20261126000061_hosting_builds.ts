import { Migration } from '@mikro-orm/migrations';

/** Real builds (docs/hosting.md): which builder built a deployment, and whether its commit was asked for. */
export class Migration20261126000061_hosting_builds extends Migration {
  override name = 'Migration20261126000061_hosting_builds';

  override up(): void {
    this.addSql(
      `alter table "hosting_deployments" add column "builder" text not null default 'simulated' check ("builder" in ('simulated', 'local'));`,
    );
    this.addSql(
      `alter table "hosting_deployments" add column "commit_pinned" boolean not null default true;`,
    );
    // What the edge served, per site and minute (the detail view's metrics of sites built for real).
    this.addSql(`
      create table "hosting_edge_traffic" (
        "site_id" varchar(64) not null references "hosting_sites" ("id") on update cascade on delete cascade,
        "minute" timestamptz(3) not null,
        "requests" bigint not null,
        "bytes" bigint not null,
        primary key ("site_id", "minute")
      );`);
  }
}
