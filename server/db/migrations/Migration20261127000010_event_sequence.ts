import { Migration } from '@mikro-orm/migrations';

export class Migration20261127000010_event_sequence extends Migration {
  override name = 'Migration20261127000010_event_sequence';

  override up(): void {
    // Events are ordered by the order they were recorded in, not by their time (several share one instant): a
    // sequence numbers them as they are inserted. Rows already there are numbered in the order of their time.
    this.addSql(`create sequence "events_seq_seq";`);
    this.addSql(`alter table "events" add column "seq" bigint null;`);
    this.addSql(`
      update "events" e set "seq" = n."seq"
        from (select "id", nextval('events_seq_seq') as "seq" from
               (select "id" from "events" order by "created_at", "id") o) n
       where e."id" = n."id";`);
    this.addSql(`alter table "events" alter column "seq" set default nextval('events_seq_seq');`);
    this.addSql(`alter table "events" alter column "seq" set not null;`);
    this.addSql(`alter sequence "events_seq_seq" owned by "events"."seq";`);
    this.addSql(`drop index "events_organization_id_index";`);
    this.addSql(`create index "events_organization_id_index" on "events" ("organization_id", "seq");`);
    this.addSql(`drop index "events_undispatched_index";`);
    this.addSql(
      `create index "events_undispatched_index" on "events" ("seq") where "dispatched_at" is null;`,
    );
  }
}
