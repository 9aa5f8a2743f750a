import { Migration } from '@mikro-orm/migrations';

export class Migration20261124000021_idempotency extends Migration {
  override name = 'Migration20261124000021_idempotency';

  override up(): void {
    // Written by server/trpc/idempotency.ts in the transaction of the change it answers; purged after 24 hours.
    this.addSql(`
      create table "idempotency_records" (
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "key" varchar(255) not null,
        "procedure" varchar(128) not null,
        "fingerprint" varchar(64) not null,
        "status" int not null,
        "body" text not null,
        "created_at" timestamptz(3) not null,
        "expires_at" timestamptz(3) not null,
        primary key ("organization_id", "key")
      );`);
    this.addSql(
      `create index "idempotency_records_expires_at_index" on "idempotency_records" ("expires_at");`,
    );
  }
}
