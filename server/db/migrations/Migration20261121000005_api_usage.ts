import { Migration } from '@mikro-orm/migrations';

export class Migration20261121000005_api_usage extends Migration {
  override name = 'Migration20261121000005_api_usage';

  override up(): void {
    // API calls per organization, user and UTC day, written in batches by server/limits/api-usage.ts.
    // No foreign keys on purpose: a batch of counters must never fail because a user or organization went away.
    this.addSql(`
      create table "api_calls_daily" (
        "organization_id" varchar(64) not null,
        "day" date not null,
        "user_id" varchar(64) not null,
        "count" integer not null default 0,
        "rate_limited" integer not null default 0,
        primary key ("organization_id", "day", "user_id")
      );`);
    this.addSql(`create index "api_calls_daily_user_id_index" on "api_calls_daily" ("user_id", "day");`);
  }

  override down(): void {
    this.addSql(`drop table if exists "api_calls_daily";`);
  }
}
