import { Migration } from '@mikro-orm/migrations';

/** The subscription's state on the organization (written by billing; read by the plan-limit check). */
export class Migration20261121000006_plan_status extends Migration {
  override name = 'Migration20261121000006_plan_status';

  override up(): void {
    this.addSql(`
      alter table "organizations" add column "plan_status" text not null default 'active'
        check ("plan_status" in ('active', 'past_due', 'canceled'));`);
  }
}
