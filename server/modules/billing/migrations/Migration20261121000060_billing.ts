import { Migration } from '@mikro-orm/migrations';

export class Migration20261121000060_billing extends Migration {
  override name = 'Migration20261121000060_billing';

  override up(): void {
    this.addSql(`
      create table "subscriptions" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "status" text not null default 'active' check ("status" in ('active', 'past_due', 'canceled')),
        "current_period_start" timestamptz(3) not null,
        "current_period_end" timestamptz(3) not null,
        "billing_anchor" timestamptz(3) not null,
        "cancel_at_period_end" boolean not null default false,
        "canceled_at" timestamptz(3) null,
        "invoice_prefix" varchar(8) not null,
        "invoice_seq" int not null default 0,
        "pending_items" jsonb not null default '[]',
        "credit_balance" int not null default 0,
        check ("current_period_end" > "current_period_start")
      );`);
    this.addSql(
      `create unique index "subscriptions_organization_id_unique" on "subscriptions" ("organization_id");`,
    );
    this.addSql(
      `create unique index "subscriptions_invoice_prefix_unique" on "subscriptions" ("invoice_prefix");`,
    );
    // The renewal sweep's query: subscriptions whose period has ended.
    this.addSql(
      `create index "subscriptions_due_index" on "subscriptions" ("current_period_end") where "status" <> 'canceled';`,
    );

    this.addSql(`
      create table "payment_methods" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "type" text not null default 'card' check ("type" in ('card')),
        "brand" varchar(32) not null,
        "last4" varchar(4) not null,
        "exp_month" int not null,
        "exp_year" int not null,
        "processor_ref" varchar(128) not null,
        "is_default" boolean not null default false
      );`);
    this.addSql(
      `create index "payment_methods_organization_id_index" on "payment_methods" ("organization_id", "created_at" desc, "id" desc);`,
    );
    this.addSql(
      `create unique index "payment_methods_default_unique" on "payment_methods" ("organization_id") where "is_default";`,
    );

    this.addSql(`
      create table "invoices" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "subscription_id" varchar(64) not null references "subscriptions" ("id") on update cascade on delete cascade,
        "number" varchar(16) not null,
        "status" text not null check ("status" in ('draft', 'open', 'paid', 'void', 'uncollectible')),
        "billing_reason" text not null check ("billing_reason" in ('subscription_cycle', 'subscription_update', 'subscription_create', 'subscription_final')),
        "currency" varchar(3) not null default 'usd',
        "line_items" jsonb not null,
        "amount" int not null,
        "tax" int not null,
        "tax_rate_milli" int not null,
        "tax_jurisdiction" varchar(100) not null,
        "total" int not null,
        "period_start" timestamptz(3) null,
        "period_end" timestamptz(3) null,
        "renewal_of" timestamptz(3) null,
        "due_date" timestamptz(3) not null,
        "paid_at" timestamptz(3) null,
        "payment_method" jsonb null,
        "charge_id" varchar(64) null,
        "attempt_count" int not null default 0,
        "scheduled_retries" int not null default 0,
        "next_payment_attempt" timestamptz(3) null,
        check ("total" = "amount" + "tax")
      );`);
    this.addSql(
      `create index "invoices_organization_id_index" on "invoices" ("organization_id", "created_at" desc, "id" desc);`,
    );
    this.addSql(`create index "invoices_subscription_id_index" on "invoices" ("subscription_id");`);
    this.addSql(`create unique index "invoices_number_unique" on "invoices" ("organization_id", "number");`);
    // Exactly once: a period is opened by one renewal invoice at most.
    this.addSql(
      `create unique index "invoices_renewal_unique" on "invoices" ("subscription_id", "renewal_of") where "renewal_of" is not null;`,
    );
    this.addSql(
      `create index "invoices_retry_index" on "invoices" ("next_payment_attempt") where "status" = 'open';`,
    );

    // Organizations that exist already get their subscription: starter's state, the current calendar-month period
    // counted from the organization's creation (whole seconds), and a random invoice prefix.
    this.addSql(`
      insert into "subscriptions" ("id", "created_at", "updated_at", "organization_id", "status",
          "current_period_start", "current_period_end", "billing_anchor", "invoice_prefix")
      select 'sub_' || substr(md5(random()::text || o.id), 1, 20), now(), now(), o.id, 'active',
             (a.anchor + k.n * interval '1 month') at time zone 'UTC',
             (a.anchor + (k.n + 1) * interval '1 month') at time zone 'UTC',
             a.anchor at time zone 'UTC',
             upper(substr(md5(random()::text || o.id || 'prefix'), 1, 8))
        from "organizations" o
        cross join lateral (select date_trunc('second', o.created_at at time zone 'UTC') as anchor) a
        cross join lateral (
          select greatest(0, (extract(year from age(now() at time zone 'UTC', a.anchor)) * 12
                 + extract(month from age(now() at time zone 'UTC', a.anchor)))::int) as n
        ) k;`);
  }
}
