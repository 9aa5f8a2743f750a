import { Migration } from '@mikro-orm/migrations';

/**
 * Exact list totals without counting rows (docs/api-conventions.md, "Lists"): `list_counts` holds, per list, the number of rows of
 * each combination of the list's scope (organization, site, database), owner and enum filters, maintained by
 * statement-level triggers in the transaction that writes the rows. A total is the sum of the few rows that match a
 * request's filters. Written this way, the counts stay exact whoever writes the rows: the API, a job, an operator's
 * bulk `insert … select`, a migration, `truncate`.
 *
 * Each statement adds its changes up per key and applies them in key order, so two statements never take the
 * count rows' locks in opposite orders; a key whose count reaches 0 is removed (by the statement holding its lock).
 */

export interface CountedList {
  /** The list's name in `list_counts.list` (its table's name). */
  list: string;
  table: string;
  /** The column every read of the list fixes (the organization, or the parent a list belongs to). */
  scope: string;
  /** The owner column a list may be narrowed to; counts are kept per owner and for all owners (`owner_id` ''). */
  owner?: string;
  /**
   * Lists written by many concurrent transactions of one scope that nothing else queues (the audit log, a
   * webhook's deliveries): counts are kept in 16 rows per key (`owner_id` is the writing backend's pid modulo 16), so
   * that concurrent writers seldom wait on one count row; a total sums them (a shard may go below 0 when rows are
   * deleted by another backend than wrote them: only the sum means something).
   */
  sharded?: boolean;
  /** Enum filter columns, in `d1`, `d2`, `d3` order. */
  dims: string[];
  /** The rows the list shows (e.g. `"removed_at" is null`). */
  shown?: string;
}

/** The counted lists (migration 20261127000020 shards all their counts). */
export const LISTS: CountedList[] = [
  {
    list: 'vpn_connections',
    table: 'vpn_connections',
    scope: 'organization_id',
    owner: 'user_id',
    dims: ['status', 'protocol', 'location'],
  },
  {
    list: 'hosting_sites',
    table: 'hosting_sites',
    scope: 'organization_id',
    owner: 'user_id',
    dims: ['status', 'framework'],
  },
  {
    list: 'databases',
    table: 'databases',
    scope: 'organization_id',
    owner: 'user_id',
    dims: ['engine', 'status', 'region'],
    shown: '"removed_at" is null',
  },
  {
    list: 'users',
    table: 'users',
    scope: 'organization_id',
    dims: ['role', 'status'],
    shown: '"deleted_at" is null',
  },
  { list: 'api_keys', table: 'api_keys', scope: 'organization_id', dims: [], shown: '"revoked_at" is null' },
  { list: 'hosting_deployments', table: 'hosting_deployments', scope: 'site_id', dims: ['status'] },
  { list: 'database_backups', table: 'database_backups', scope: 'database_id', dims: ['type', 'status'] },
  { list: 'invoices', table: 'invoices', scope: 'organization_id', dims: ['status'] },
  { list: 'audit_logs', table: 'audit_logs', scope: 'organization_id', dims: ['action'], sharded: true },
  {
    list: 'webhook_deliveries',
    table: 'webhook_deliveries',
    scope: 'webhook_id',
    dims: ['status', 'event_type'],
    sharded: true,
  },
];

/** The indexes of the filtered page reads (each also declared by its entity). */
const INDEXES: [name: string, table: string, columns: string, where?: string][] = [
  ['vpn_connections_filter_index', 'vpn_connections', '"organization_id", "status", "protocol", "location"'],
  [
    'vpn_connections_owner_filter_index',
    'vpn_connections',
    '"organization_id", "user_id", "status", "protocol", "location"',
  ],
  ['hosting_sites_filter_index', 'hosting_sites', '"organization_id", "status", "framework"'],
  [
    'hosting_sites_owner_filter_index',
    'hosting_sites',
    '"organization_id", "user_id", "status", "framework"',
  ],
  [
    'databases_filter_index',
    'databases',
    '"organization_id", "engine", "status", "region"',
    '"removed_at" is null',
  ],
  [
    'databases_owner_filter_index',
    'databases',
    '"organization_id", "user_id", "engine", "status", "region"',
    '"removed_at" is null',
  ],
  ['users_filter_index', 'users', '"organization_id", "role", "status"', '"deleted_at" is null'],
  ['hosting_deployments_filter_index', 'hosting_deployments', '"site_id", "status"'],
  ['database_backups_filter_index', 'database_backups', '"database_id", "type", "status"'],
  ['invoices_filter_index', 'invoices', '"organization_id", "status"'],
];

const KEY = '"list", "scope_id", "owner_id", "d1", "d2", "d3"';

/** The rows of one transition table as (key…, n) with `sign` per row, for all owners and per owner. */
function keyed(l: CountedList, rows: string, sign: 1 | -1): string {
  const dims = [0, 1, 2].map((i) => (l.dims[i] ? `"${l.dims[i]}"::text` : `''`));
  const where = l.shown ? ` where ${l.shown}` : '';
  const select = (owner: string) =>
    `select '${l.list}', "${l.scope}"::text, ${owner}, ${dims.join(', ')}, ${sign} from ${rows}${where}`;
  if (l.sharded) return select(`(pg_backend_pid() % 16)::text`);
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
      returning c."list", c."scope_id", c."owner_id", c."d1", c."d2", c."d3", c."n"
    loop
      if k."n" = 0 then
        delete from "list_counts" c
         where (c."list", c."scope_id", c."owner_id", c."d1", c."d2", c."d3")
             = (k."list", k."scope_id", k."owner_id", k."d1", k."d2", k."d3") and c."n" = 0;
      end if;
    end loop;`;
}

function triggers(l: CountedList): string[] {
  const fn = `list_counts_${l.list}`;
  return [
    `create function "${fn}"() returns trigger language plpgsql as $$
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
end $$;`,
    `create trigger "${fn}_insert" after insert on "${l.table}" referencing new table as new_rows for each statement execute function "${fn}"();`,
    `create trigger "${fn}_delete" after delete on "${l.table}" referencing old table as old_rows for each statement execute function "${fn}"();`,
    `create trigger "${fn}_update" after update on "${l.table}" referencing old table as old_rows new table as new_rows for each statement execute function "${fn}"();`,
    `create trigger "${fn}_truncate" after truncate on "${l.table}" for each statement execute function "${fn}"();`,
    // Backfill: the rows written before the triggers.
    `insert into "list_counts" (${KEY}, "n")
     select ${KEY}, sum("n") from (${keyed(l, `"${l.table}"`, 1)}) d (${KEY}, "n") group by ${KEY};`,
  ];
}

export class Migration20261124000030_list_counts extends Migration {
  override name = 'Migration20261124000030_list_counts';

  override up(): void {
    this.addSql(`
      create table "list_counts" (
        "list" varchar(64) not null,
        "scope_id" varchar(64) not null,
        "owner_id" varchar(64) not null,
        "d1" varchar(64) not null,
        "d2" varchar(64) not null,
        "d3" varchar(64) not null,
        "n" bigint not null,
        primary key ("list", "scope_id", "owner_id", "d1", "d2", "d3")
      );`);
    for (const l of LISTS) for (const sql of triggers(l)) this.addSql(sql);
    // Page reads for every filter combination: the scope (and owner), every enum filter, then the list's order, so
    // that a page is a range of one index whichever filters are fixed (server/db/raw-page.ts).
    for (const [name, table, columns, where] of INDEXES) {
      this.addSql(
        `create index "${name}" on "${table}" (${columns}, "created_at" desc, "id" desc)${where ? ` where ${where}` : ''};`,
      );
    }
  }
}
