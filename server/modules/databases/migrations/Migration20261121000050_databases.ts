import { Migration } from '@mikro-orm/migrations';

/** Managed databases, their backups, and the billable periods of each size. */
export class Migration20261121000050_databases extends Migration {
  override name = 'Migration20261121000050_databases';

  override up(): void {
    this.addSql(`
      create table "databases" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "user_id" varchar(64) not null references "users" ("id") on update cascade,
        "name" varchar(63) not null,
        "engine" text not null check ("engine" in ('postgresql', 'mysql', 'mongodb')),
        "version" varchar(8) not null,
        "size" text not null check ("size" in ('small', 'medium', 'large', 'xl')),
        "region" varchar(32) not null,
        "status" text not null default 'creating' check ("status" in ('creating', 'running', 'resizing', 'deleting')),
        "backup_enabled" boolean not null default true,
        "multi_az" boolean not null default false,
        "backup_retention" int not null default 7 check ("backup_retention" >= 1 and "backup_retention" <= 35),
        "host" varchar(253) not null,
        "db_name" varchar(63) not null,
        "db_user" varchar(63) not null,
        "password_hash" varchar(64) not null,
        "generation" int not null default 1,
        "backup_schedule" int not null default 0,
        "next_backup_at" timestamptz(3) null,
        "last_backup_at" timestamptz(3) null,
        "deletion_scheduled_at" timestamptz(3) null,
        "removed_at" timestamptz(3) null,
        "restored_from_backup_id" varchar(64) null
      );`);
    this.addSql(
      `create index "databases_organization_index" on "databases" ("organization_id", "created_at" desc, "id" desc) where "removed_at" is null;`,
    );
    this.addSql(
      `create index "databases_owner_index" on "databases" ("organization_id", "user_id", "created_at" desc, "id" desc) where "removed_at" is null;`,
    );
    this.addSql(`create index "databases_user_id_index" on "databases" ("user_id");`);
    this.addSql(
      `create index "databases_deletion_scheduled_at_index" on "databases" ("deletion_scheduled_at") where "status" = 'deleting' and "removed_at" is null;`,
    );
    this.addSql(
      `create unique index "databases_organization_id_name_unique" on "databases" ("organization_id", "name") where "removed_at" is null;`,
    );

    this.addSql(`
      create table "database_backups" (
        "id" varchar(64) primary key,
        "created_at" timestamptz(3) not null,
        "updated_at" timestamptz(3) not null,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "database_id" varchar(64) not null references "databases" ("id") on update cascade on delete cascade,
        "type" text not null check ("type" in ('automatic', 'manual', 'final')),
        "status" text not null default 'pending' check ("status" in ('pending', 'completed', 'failed')),
        "name" varchar(100) not null,
        "description" varchar(500) null,
        "size_bytes" bigint null,
        "completed_at" timestamptz(3) null,
        "expires_at" timestamptz(3) null
      );`);
    this.addSql(
      `create index "database_backups_organization_id_index" on "database_backups" ("organization_id");`,
    );
    this.addSql(
      `create index "database_backups_database_index" on "database_backups" ("database_id", "created_at" desc, "id" desc);`,
    );
    this.addSql(
      `create index "database_backups_expires_at_index" on "database_backups" ("expires_at") where "expires_at" is not null;`,
    );

    this.addSql(`
      create table "database_usage_periods" (
        "id" serial primary key,
        "organization_id" varchar(64) not null references "organizations" ("id") on update cascade on delete cascade,
        "database_id" varchar(64) not null references "databases" ("id") on update cascade on delete cascade,
        "size" text not null check ("size" in ('small', 'medium', 'large', 'xl')),
        "started_at" timestamptz(3) not null,
        "ended_at" timestamptz(3) null
      );`);
    this.addSql(
      `create index "database_usage_periods_organization_index" on "database_usage_periods" ("organization_id", "started_at");`,
    );
    this.addSql(
      `create index "database_usage_periods_open_index" on "database_usage_periods" ("database_id") where "ended_at" is null;`,
    );
  }
}
