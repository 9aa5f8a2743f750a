import { Migration } from '@mikro-orm/migrations';

export class Migration20261121000020_webhooks extends Migration {
  override name = 'Migration20261121000020_webhooks';

  override up(): void {
    // Platform events (a VPN server added to the shared catalogue) concern every organization: null here.
    this.addSql(`alter table "events" alter column "organization_id" drop not null;`);
    // `json` keeps the object's key order as the API shows it (jsonb reorders keys); delivery bodies are built from it.
    this.addSql(`alter table "events" alter column "data" type json using "data"::json;`);
    // Other processes (a second server, an operator command) learn of new events at commit, not at their next sweep.
    this.addSql(`
      create or replace function "events_notify"() returns trigger language plpgsql as $$
      begin
        perform pg_notify('platform_events', '');
        return null;
      end
      $$;`);
    this.addSql(
      `create trigger "events_notify_insert" after insert on "events" for each statement execute function "events_notify"();`,
    );

    this.addSql(`
      create table "webhooks" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "url" varchar(2048) not null,
        "events" text[] not null,
        "description" varchar(500) null,
        "secret" varchar(128) not null,
        "status" text not null default 'active' check ("status" in ('active', 'inactive', 'disabled'))
      );`);
    this.addSql(
      `create index "webhooks_organization_id_index" on "webhooks" ("organization_id", "created_at");`,
    );

    this.addSql(`
      create table "webhook_deliveries" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "webhook_id" varchar(64) not null references "webhooks" ("id") on update cascade on delete cascade,
        "organization_id" varchar(64) not null,
        "event_id" varchar(64) not null,
        "event_type" varchar(64) not null,
        "payload" text not null,
        "status" text not null default 'pending' check ("status" in ('pending', 'success', 'failed')),
        "attempts" int not null default 0,
        "next_attempt_at" timestamptz(3) null,
        "last_attempt_at" timestamptz(3) null,
        "delivered_at" timestamptz(3) null,
        "response_status" int null,
        "response_time_ms" int null,
        "last_error" varchar(500) null
      );`);
    // One delivery per event and webhook, however many relays see the event.
    this.addSql(
      `create unique index "webhook_deliveries_event_webhook_unique" on "webhook_deliveries" ("event_id", "webhook_id");`,
    );
    this.addSql(
      `create index "webhook_deliveries_webhook_id_index" on "webhook_deliveries" ("webhook_id", "created_at" desc, "id" desc);`,
    );
    this.addSql(
      `create index "webhook_deliveries_due_index" on "webhook_deliveries" ("next_attempt_at") where "status" = 'pending';`,
    );
  }
}
