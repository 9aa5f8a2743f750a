import type { RouterInputs, RouterOutputs } from '@cloud-platform/client';
import { positiveInteger } from '../cli.js';
import { defineCommandGroup } from '../command-group.js';
import { fields, table } from '../output.js';

type CreateInput = RouterInputs['databases']['create'];
type Database = RouterOutputs['databases']['get']['database'];

interface CreateOptions {
  engine: string;
  version?: string;
  size?: string;
  region?: string;
  backups?: boolean;
  wait?: boolean;
  timeout?: number;
}

const databaseFields = (d: Database) =>
  fields({
    id: d.id,
    name: d.name,
    engine: `${d.engine} ${d.version}`,
    status: d.status,
    size: d.size,
    region: d.region,
    storage: d.storage,
    connection: d.connection_string,
    'last backup': d.last_backup,
    'deletion scheduled': d.deletion_scheduled,
  });

export default defineCommandGroup({
  name: 'databases',
  register(program, cli) {
    const databases = program.command('databases').description('managed databases and their backups');

    databases
      .command('list')
      .description('list your databases')
      .action(async () => {
        const res = await cli.client().databases.list.query({});
        cli.print(res, () =>
          table(res.databases, {
            id: (d) => d.id,
            name: (d) => d.name,
            engine: (d) => `${d.engine} ${d.version}`,
            status: (d) => d.status,
            size: (d) => d.size,
            region: (d) => d.region,
          }),
        );
      });

    databases
      .command('create')
      .description('create a database')
      .argument('<name>', 'the database name')
      .requiredOption('--engine <engine>', 'postgresql, mysql or mongodb')
      .option('--version <version>', 'the engine version (default: the newest)')
      .option('--size <size>', 'small, medium, large or xl')
      .option('--region <region>', 'us-east, eu-west, ...')
      .option('--backups', 'automatic backups')
      .option('--wait', 'wait until it is running')
      .option('--timeout <seconds>', 'how long --wait waits', positiveInteger, 600)
      .action(async (name: string, o: CreateOptions) => {
        const client = cli.client();
        let res = await client.databases.create.mutate({
          name,
          engine: o.engine as CreateInput['engine'],
          ...(o.version ? { version: o.version as CreateInput['version'] } : {}),
          ...(o.size ? { size: o.size as CreateInput['size'] } : {}),
          ...(o.region ? { region: o.region as CreateInput['region'] } : {}),
          ...(o.backups ? { backup_enabled: true } : {}),
        });
        if (o.wait) {
          const id = res.database.id;
          res = await cli.waitFor({
            poll: () => client.databases.get.query({ id }),
            describe: (s) => `database ${id} is ${s.database.status}`,
            done: (s) => s.database.status !== 'creating',
            timeoutSeconds: o.timeout,
          });
        }
        cli.print(res, () => databaseFields(res.database));
      });

    databases
      .command('show')
      .description('show a database')
      .argument('<id>', 'the database id')
      .action(async (id: string) => {
        const res = await cli.client().databases.get.query({ id });
        cli.print(res, () => databaseFields(res.database));
      });

    databases
      .command('backup')
      .description('take a backup now')
      .argument('<id>', 'the database id')
      .option('--name <name>', 'a name for the backup')
      .option('--wait', 'wait until the backup is completed')
      .option('--timeout <seconds>', 'how long --wait waits', positiveInteger, 600)
      .action(async (id: string, o: { name?: string; wait?: boolean; timeout?: number }) => {
        const client = cli.client();
        const res = await client.databases.backups.create.mutate({ id, ...(o.name ? { name: o.name } : {}) });
        let backup = res.backup;
        if (o.wait) {
          const list = await cli.waitFor({
            poll: () => client.databases.backups.list.query({ id }),
            describe: (s) =>
              `backup ${backup.id} is ${s.backups.find((b) => b.id === backup.id)?.status ?? '?'}`,
            done: (s) => s.backups.find((b) => b.id === backup.id)?.status !== 'pending',
            timeoutSeconds: o.timeout,
          });
          backup = list.backups.find((b) => b.id === backup.id) ?? backup;
        }
        cli.print({ ...res, backup }, () =>
          fields({ backup: backup.id, status: backup.status, size: backup.size, created: backup.created_at }),
        );
      });

    databases
      .command('backups')
      .description('list a database’s backups')
      .argument('<id>', 'the database id')
      .action(async (id: string) => {
        const res = await cli.client().databases.backups.list.query({ id });
        cli.print(res, () =>
          table(res.backups, {
            id: (b) => b.id,
            name: (b) => b.name,
            type: (b) => b.type,
            status: (b) => b.status,
            size: (b) => b.size,
            created: (b) => b.created_at,
          }),
        );
      });

    databases
      .command('delete')
      .description('schedule the deletion of a database (it can be kept with cancel-deletion until then)')
      .argument('<id>', 'the database id')
      .action(async (id: string) => {
        const res = await cli.client().databases.delete.mutate({ id });
        cli.print(
          res,
          () => `Deletion of ${id} scheduled; keep it with: cloud databases cancel-deletion ${id}`,
        );
      });

    databases
      .command('cancel-deletion')
      .description('keep a database whose deletion is scheduled')
      .argument('<id>', 'the database id')
      .action(async (id: string) => {
        const res = await cli.client().databases.cancelDeletion.mutate({ id });
        cli.print(res, () => databaseFields(res.database));
      });
  },
});
