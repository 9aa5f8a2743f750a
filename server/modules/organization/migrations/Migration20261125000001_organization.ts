import { Migration } from '@mikro-orm/migrations';

/** The deletion mark of an organization (docs/organization.md, "The organization"). */
export class Migration20261125000001_organization extends Migration {
  override name = 'Migration20261125000001_organization';

  override up(): void {
    this.addSql(`alter table "organizations" add column "deleted_at" timestamptz(3) null;`);
  }
}
