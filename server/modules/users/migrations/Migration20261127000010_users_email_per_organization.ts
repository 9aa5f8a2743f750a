import { Migration } from '@mikro-orm/migrations';

/**
 * An email is unique per organization among users not deleted, and among sign-in accounts (every status but
 * `invited`) across the platform: a pending invitation no longer reserves the address in every organization
 * (docs/users-and-permissions.md, "Invitations"; docs/security.md).
 */
export class Migration20261127000010_users_email_per_organization extends Migration {
  override name = 'Migration20261127000010_users_email_per_organization';

  override up(): void {
    this.addSql(`drop index if exists "users_email_unique";`);
    this.addSql(
      `create unique index "users_organization_email_unique" on "users" ("organization_id", "email") where "deleted_at" is null;`,
    );
    this.addSql(
      `create unique index "users_account_email_unique" on "users" ("email") where "deleted_at" is null and "status" <> 'invited';`,
    );
  }
}
