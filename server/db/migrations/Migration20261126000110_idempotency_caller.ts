import { Migration } from '@mikro-orm/migrations';

export class Migration20261126000110_idempotency_caller extends Migration {
  override name = 'Migration20261126000110_idempotency_caller';

  override up(): void {
    // A kept answer belongs to its caller (a user, or an API key) as well as its organization and key, and its body
    // is stored encrypted (server/trpc/idempotency.ts). Records kept before were neither: they are dropped (they
    // live 24 hours; a retry of one of those requests runs again).
    this.addSql(`delete from "idempotency_records";`);
    this.addSql(`alter table "idempotency_records" drop constraint "idempotency_records_pkey";`);
    this.addSql(`alter table "idempotency_records" add column "caller_id" varchar(64) not null;`);
    this.addSql(
      `alter table "idempotency_records" add constraint "idempotency_records_pkey" primary key ("organization_id", "caller_id", "key");`,
    );
  }
}
