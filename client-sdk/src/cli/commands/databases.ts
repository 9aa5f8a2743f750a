import type { RouterInputs, RouterOutputs } from '@cloud-platform/client';
import { positiveInteger } from '../cli.js';
import { defineCommandGroup, documented } from '../command-group.js';
import { fields, table } from '../output.js';

type CreateInput = RouterInputs['databases']['create'];
type ListInput = NonNullable<Exclude<RouterInputs['databases']['list'], void>>;
type UpdateInput = RouterInputs['databases']['update'];
type Database = RouterOutputs['databases']['get']['database'];

interface CreateOptions {
  engine: string;
  version?: string;
  size?: string;
  region?: string;
  backups?: boolean;
  multiAz?: boolean;
  retention?: number;
  fromBackup?: string;
  wait?: boolean;
  timeout?: number;
}

interface UpdateOptions {
  size?: string;
  backups?: boolean;
  retention?: number;
  wait?: boolean;
  timeout?: number;
}

/** The one-time password of a create or reset-password answer, said once and plainly (docs/cli.md, "Secrets"). */
const passwordLines = (password: string) => [
  '',
  `password: ${password}`,
  'The password is shown only now (the API keeps a hash): store it safely. A new one: cloud databases reset-password <id>',
];

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
    const waitWhileResizing = async (id: string, timeout: number | undefined) =>
      cli.waitFor({
        poll: () => cli.client().databases.get.query({ id }),
        describe: (s) => `database ${id} is ${s.database.status}`,
        done: (s) => s.database.status !== 'resizing',
        timeoutSeconds: timeout,
      });

    documented(databases.command('list'), {
      calls: ['databasesList'],
      examples: ['cloud databases list --engine postgresql'],
    })
      .description('list your databases')
      .option('--engine <engine>', 'only postgresql, mysql or mongodb ones')
      .option('--status <status>', 'only those in this state (creating, running, resizing, deleting, failed)')
      .option('--region <region>', 'only those in this region')
      .option('--page <n>', 'the page, from 1', positiveInteger)
      .option('--limit <n>', 'databases per page', positiveInteger)
      .action(
        async (o: { engine?: string; status?: string; region?: string; page?: number; limit?: number }) => {
          const res = await cli.client().databases.list.query({
            ...(o.engine ? { engine: o.engine as ListInput['engine'] } : {}),
            ...(o.status ? { status: o.status as ListInput['status'] } : {}),
            ...(o.region ? { region: o.region as ListInput['region'] } : {}),
            ...(o.page !== undefined ? { page: o.page } : {}),
            ...(o.limit !== undefined ? { limit: o.limit } : {}),
          });
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
        },
      );

    documented(databases.command('create'), {
      calls: ['databasesCreate', 'databasesGet'],
      examples: [
        'cloud databases create orders --engine postgresql --size medium --wait',
        'cloud databases create orders-copy --engine postgresql --from-backup backup_abc123 --wait',
      ],
    })
      .description('create a database')
      .argument('<name>', 'the database name')
      .requiredOption('--engine <engine>', 'postgresql, mysql or mongodb')
      .option('--version <version>', 'the engine version (default: the newest)')
      .option('--size <size>', 'small, medium, large or xl')
      .option('--region <region>', 'us-east, eu-west, ...')
      .option('--backups', 'automatic backups (the default)')
      .option('--no-backups', 'no automatic backups')
      .option('--multi-az', 'a standby in a second availability zone')
      .option('--retention <days>', 'days an automatic backup is kept', positiveInteger)
      .option('--from-backup <backup>', 'create it from this completed backup (backup_…) of the same engine')
      .option('--wait', 'wait until it is running')
      .option('--timeout <seconds>', 'how long --wait waits', positiveInteger, 600)
      .action(async (name: string, o: CreateOptions) => {
        const client = cli.client();
        const created = await client.databases.create.mutate({
          name,
          engine: o.engine as CreateInput['engine'],
          ...(o.version ? { version: o.version as CreateInput['version'] } : {}),
          ...(o.size ? { size: o.size as CreateInput['size'] } : {}),
          ...(o.region ? { region: o.region as CreateInput['region'] } : {}),
          ...(o.backups !== undefined ? { backup_enabled: o.backups } : {}),
          ...(o.multiAz ? { multi_az: true } : {}),
          ...(o.retention !== undefined ? { backup_retention: o.retention } : {}),
          ...(o.fromBackup ? { backup_id: o.fromBackup } : {}),
        });
        let res = created;
        if (o.wait) {
          const id = created.database.id;
          const final = await cli.waitFor({
            poll: () => client.databases.get.query({ id }),
            describe: (s) => `database ${id} is ${s.database.status}`,
            done: (s) => s.database.status !== 'creating',
            timeoutSeconds: o.timeout,
          });
          // Reads mask the password: the create answer's is the only one there will ever be.
          res = {
            ...final,
            database: {
              ...final.database,
              connection_string: created.database.connection_string,
              connection_info: created.database.connection_info,
            },
          };
        }
        const password = created.database.connection_info.password;
        cli.print(res, () =>
          [databaseFields(res.database), ...(password ? passwordLines(password) : [])].join('\n'),
        );
      });

    documented(databases.command('show'), {
      calls: ['databasesGet'],
      examples: ['cloud databases show db_abc123'],
    })
      .description('show a database')
      .argument('<id>', 'the database id')
      .action(async (id: string) => {
        const res = await cli.client().databases.get.query({ id });
        cli.print(res, () => databaseFields(res.database));
      });

    documented(databases.command('backup'), {
      calls: ['databasesBackupsCreate', 'databasesBackupsList'],
      examples: ['cloud databases backup db_abc123 --name before-migration --wait'],
    })
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

    documented(databases.command('backups'), {
      calls: ['databasesBackupsList'],
      examples: ['cloud databases backups db_abc123'],
    })
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

    documented(databases.command('delete'), {
      calls: ['databasesDelete'],
      examples: ['cloud databases delete db_abc123'],
    })
      .description('schedule the deletion of a database (it can be kept with cancel-deletion until then)')
      .argument('<id>', 'the database id')
      .action(async (id: string) => {
        const res = await cli.client().databases.delete.mutate({ id });
        cli.print(
          res,
          () => `Deletion of ${id} scheduled; keep it with: cloud databases cancel-deletion ${id}`,
        );
      });

    documented(databases.command('cancel-deletion'), {
      calls: ['databasesCancelDeletion'],
      examples: ['cloud databases cancel-deletion db_abc123'],
    })
      .description('keep a database whose deletion is scheduled')
      .argument('<id>', 'the database id')
      .action(async (id: string) => {
        const res = await cli.client().databases.cancelDeletion.mutate({ id });
        cli.print(res, () => databaseFields(res.database));
      });

    const update = (name: string, description: string, examples: string[]) =>
      documented(databases.command(name), { calls: ['databasesUpdate', 'databasesGet'], examples })
        .description(description)
        .argument('<id>', 'the database id (db_…)')
        .option('--wait', 'wait until a new size is applied')
        .option('--timeout <seconds>', 'how long --wait waits', positiveInteger, 600);
    const runUpdate = async (id: string, o: UpdateOptions) => {
      const input: UpdateInput = {
        id,
        ...(o.size ? { size: o.size as UpdateInput['size'] } : {}),
        ...(o.backups !== undefined ? { backup_enabled: o.backups } : {}),
        ...(o.retention !== undefined ? { backup_retention: o.retention } : {}),
      };
      let res = await cli.client().databases.update.mutate(input);
      if (o.wait && res.database.status === 'resizing') res = await waitWhileResizing(id, o.timeout);
      cli.print(res, () => databaseFields(res.database));
    };

    update('update', 'change a database: its size, automatic backups and their retention', [
      'cloud databases update db_abc123 --no-backups',
      'cloud databases update db_abc123 --size large --retention 14 --wait',
    ])
      .option('--size <size>', 'small, medium, large or xl (the database is resizing for a moment)')
      .option('--backups', 'turn automatic backups on')
      .option('--no-backups', 'turn automatic backups off')
      .option('--retention <days>', 'days an automatic backup is kept', positiveInteger)
      .action(runUpdate);

    update('resize', 'give a database another size (it is resizing, then running again)', [
      'cloud databases resize db_abc123 large --wait',
    ])
      .argument('<size>', 'small, medium, large or xl')
      .action((id: string, size: string, o: UpdateOptions) => runUpdate(id, { ...o, size }));

    documented(databases.command('reset-password'), {
      calls: ['databasesResetPassword'],
      examples: ['cloud databases reset-password db_abc123 --yes'],
    })
      .description('give the database user a new password; the old one stops working (asks first)')
      .argument('<id>', 'the database id (db_…)')
      .option('--yes', 'do not ask (required when not on a terminal)')
      .action(async (id: string, o: { yes?: boolean }) => {
        await cli.confirm(
          `Reset the password of ${id}? Whatever connects with the current one will be refused.`,
          o.yes,
          'resetting a database password',
        );
        const res = await cli.client().databases.resetPassword.mutate({ id });
        cli.print(res, () =>
          [
            fields({
              id: res.database.id,
              name: res.database.name,
              connection: res.database.connection_string,
            }),
            ...passwordLines(res.password),
          ].join('\n'),
        );
      });
  },
});
