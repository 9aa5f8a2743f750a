import { Migration } from '@mikro-orm/migrations';
import { LISTS, type CountedList } from './Migration20261124000030_list_counts.js';

/**
 * Every list's counts in shards (docs/api-conventions.md, "Lists"). Migration 30 kept one count row per key, so the
 * creates of one organization all updated the same row (its total, its owner's total) and queued on its lock until
 * their commits. Now each key is kept in up to 16 rows, `shard` being the writing backend's pid modulo 16: concurrent
 * writers seldom share a row, and a total is the sum of the matching rows whatever their shard (so the reads do not
 * change). The lists that were sharded already (the audit log, webhook deliveries, with the shard in `owner_id`)
 * move their shard to the new column and keep `owner_id` ''. A shard may go below 0 when rows are deleted by another
 * backend than wrote them: only the sum means something.
 */
const SHARDS = 16;
const KEY = '"list", "scope_id", "owner_id", "d1", "d2", "d3", "shard"';

/** The rows of one transition table as (key…, n) with `sign` per row, for all owners and per owner. */
function keyed(l: CountedList, rows: string, sign: 1 | -1): string {
  const dims = [0, 1, 2].map((i) => (l.dims[i] ? `"${l.dims[i]}"::text` : `''`));
  const where = l.shown ? ` where ${l.shown}` : '';
  const shard = `(pg_backend_pid() % ${SHARDS})::smallint`;
  const select = (owner: string) =>
    `select '${l.list}', "${l.scope}"::text, ${owner}, ${dims.join(', ')}, ${shard}, ${sign} from ${rows}${where}`;
  return l.owner ? `${select(`''`)} union all ${select(`"${l.owner}"::text`)}` : select(`''`);
}

/** Applies the summed changes in key order, and removes the keys it brought to 0 (rows it holds the lock of). */
function apply(deltas: string): string {
  return `
    for k in
      insert into "list_counts" as c (${KEY}, "n")
      select ${KEY}, sum("n") from (${deltas}) d (${KEY}, "n")
       group by ${KEY} having sum("n") <> 0
       order by ${KEY}
      on conflict (${KEY}) do update set "n" = c."n" + excluded."n"
      returning c."list", c."scope_id", c."owner_id", c."d1", c."d2", c."d3", c."shard", c."n"
    loop
      if k."n" = 0 then
        delete from "list_counts" c
         where (c."list", c."scope_id", c."owner_id", c."d1", c."d2", c."d3", c."shard")
             = (k."list", k."scope_id", k."owner_id", k."d1", k."d2", k."d3", k."shard") and c."n" = 0;
      end if;
    end loop;`;
}

/** The list's trigger function, replaced in place (its triggers stay). */
function triggerFunction(l: CountedList): string {
  return `create or replace function "list_counts_${l.list}"() returns trigger language plpgsql as $$
declare
  k record;
begin
  if tg_op = 'INSERT' then${apply(keyed(l, 'new_rows', 1))}
  elsif tg_op = 'DELETE' then${apply(keyed(l, 'old_rows', -1))}
  elsif tg_op = 'UPDATE' then${apply(`${keyed(l, 'new_rows', 1)} union all ${keyed(l, 'old_rows', -1)}`)}
  else
    delete from "list_counts" where "list" = '${l.list}';
  end if;
  return null;
end $$;`;
}

export class Migration20261127000020_list_count_shards extends Migration {
  override name = 'Migration20261127000020_list_count_shards';

  override up(): void {
    const sharded = LISTS.filter((l) => l.sharded).map((l) => `'${l.list}'`);
    this.addSql(`alter table "list_counts" drop constraint "list_counts_pkey";`);
    this.addSql(`alter table "list_counts" add column "shard" smallint not null default 0;`);
    this.addSql(
      `update "list_counts" set "shard" = "owner_id"::smallint, "owner_id" = '' where "list" in (${sharded.join(', ')});`,
    );
    this.addSql(`alter table "list_counts" add primary key (${KEY});`);
    for (const l of LISTS) this.addSql(triggerFunction(l));
  }
}
