import { Migration } from '@mikro-orm/migrations';

/**
 * Webhooks for operators (docs/webhooks.md, "Webhooks"): redelivery and recovery, secret rotation with an overlap,
 * auto-disable after a run of failures, and a fair order of the attempt queue.
 */
export class Migration20261124000020_webhooks_operators extends Migration {
  override name = 'Migration20261124000020_webhooks_operators';

  override up(): void {
    // The secret before the latest rotation, still signing until it expires; one at most.
    this.addSql(`alter table "webhooks" add column "previous_secret" varchar(128) null;`);
    this.addSql(`alter table "webhooks" add column "previous_secret_expires_at" timestamptz(3) null;`);
    // When the current run of failed attempts began (null after a success): auto-disable after WEBHOOK_DISABLE_AFTER.
    this.addSql(`alter table "webhooks" add column "failing_since" timestamptz(3) null;`);

    // Order of the attempt queue among due deliveries: fresh deliveries come first, a recovered backlog is spread
    // behind them (see delivery-worker.ts).
    this.addSql(`alter table "webhook_deliveries" add column "fair_at" timestamptz(3) null;`);
    this.addSql(`update "webhook_deliveries" set "fair_at" = coalesce("next_attempt_at", "created_at");`);
    this.addSql(`alter table "webhook_deliveries" alter column "fair_at" set not null;`);
    // The delivery that a redelivery or a recovery sends again (same event, same body).
    this.addSql(`alter table "webhook_deliveries" add column "redelivery_of" varchar(64) null;`);
    // Set on a failed delivery once `recover` queued a new delivery for it: each is recovered at most once.
    this.addSql(`alter table "webhook_deliveries" add column "recovered_at" timestamptz(3) null;`);

    // One delivery per event and webhook from the fan-out; redeliveries of the same event are further rows.
    this.addSql(`drop index "webhook_deliveries_event_webhook_unique";`);
    this.addSql(
      `create unique index "webhook_deliveries_event_webhook_unique" on "webhook_deliveries" ("event_id", "webhook_id") where "redelivery_of" is null;`,
    );
    this.addSql(
      `create index "webhook_deliveries_fair_index" on "webhook_deliveries" ("fair_at") where "status" = 'pending';`,
    );
    // The retention purge (30 days).
    this.addSql(`create index "webhook_deliveries_created_at_index" on "webhook_deliveries" ("created_at");`);
  }
}
