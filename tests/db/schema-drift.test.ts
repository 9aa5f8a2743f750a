// Test tier: db
import { expect } from 'chai';
import { SchemaComparator } from '@mikro-orm/sql';
import { UNMODELLED_TABLES, type Database } from '../../server/db/orm.js';
import { createJobQueue, type JobQueue } from '../../server/jobs/queue.js';
import { usingPostgres } from '../support/env.js';
import { openMigratedDatabase, quietLog } from '../support/migrated-database.js';

/**
 * The entities must describe exactly what the migrations create: a difference means either an entity that says
 * something the database does not have (fix the entity, or add a migration) or a migration the entities do not know
 * of. The database is opened as the app opens it (migrations applied) and the job queue installed, so that its
 * tables exist too; they live in the `pgboss` schema, which the diff does not read. Tables of the application's
 * schema without an entity are listed, with the reason, in UNMODELLED_TABLES (server/db/orm.ts).
 */
describe(`database schema matches the entities (${usingPostgres ? 'PostgreSQL' : 'PGlite'})`, function () {
  this.timeout(60_000);
  let db: Database;
  let jobs: JobQueue;

  before(async () => {
    // On PostgreSQL this is the run's shared database, already migrated by an earlier server or not: either way the
    // migrations are applied once, as at any start.
    db = await openMigratedDatabase();
    jobs = createJobQueue(db, quietLog);
    await jobs.start();
  });

  after(async () => {
    await jobs?.stop();
    await db?.close();
  });

  const query = <T extends object>(sql: string, params: unknown[] = []) =>
    db.orm.em.fork().execute<T[]>(sql, params);

  it('has no difference between the migrated database and the entity definitions', async () => {
    const diff = (await db.orm.schema.getUpdateSchemaSQL({ wrap: false }))
      .split('\n')
      .filter((line) => line.trim() !== '' && line !== "set names 'utf8';")
      .join('\n');
    if (diff) {
      expect.fail(
        `The migrated database differs from the entities (the modules' manifests, server/modules.ts). To bring the database to the ` +
          `entities the ORM would run:\n\n${diff}\n\nMake the entities describe what the migrations create, or add ` +
          `a migration (never edit one that has run).`,
      );
    }
  });

  it('matches the definitions of the indexes the ORM compares by name only (written as SQL)', async () => {
    const comparator = new SchemaComparator(db.orm.em.getPlatform());
    const rawIndexes = [...db.orm.getMetadata().getAll().values()].flatMap((meta) =>
      [...meta.indexes, ...meta.uniques]
        .filter((index) => typeof index.expression === 'string')
        .map((index) => ({
          table: meta.tableName,
          name: index.name!,
          expression: index.expression as string,
        })),
    );
    expect(rawIndexes, 'indexes written as SQL').to.not.be.empty;
    const differences: string[] = [];
    for (const index of rawIndexes) {
      const [row] = await query<{ indexdef: string }>(
        'select indexdef from pg_indexes where schemaname = current_schema() and tablename = ? and indexname = ?',
        [index.table, index.name],
      );
      // pg_get_indexdef names the access method, which the SQL of the entities leaves at its default.
      const actual = row?.indexdef.replace(/ USING btree /, ' ');
      if (!actual || comparator.diffExpression(index.expression, actual)) {
        differences.push(
          `${index.name}\n  entity:   ${index.expression}\n  database: ${row?.indexdef ?? '(none)'}`,
        );
      }
    }
    if (differences.length > 0) expect.fail(`Indexes that differ:\n${differences.join('\n')}`);
  });

  it('leaves out only the job queue schema and the tables listed as unmodelled, which all exist', async () => {
    const queueTables = await query<{ table_name: string }>(
      `select table_name from information_schema.tables where table_schema = 'pgboss'`,
    );
    expect(queueTables, 'the job queue tables the diff ran alongside').to.not.be.empty;
    const present = await query<{ table_name: string }>(
      `select table_name from information_schema.tables where table_schema = current_schema() and table_name in (${UNMODELLED_TABLES.map(() => '?').join(', ')})`,
      UNMODELLED_TABLES,
    );
    expect(
      present.map((r) => r.table_name).sort(),
      'UNMODELLED_TABLES lists only existing tables',
    ).to.deep.equal([...UNMODELLED_TABLES].sort());
  });
});
