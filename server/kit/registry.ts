import type { EntityName } from '@mikro-orm/core';
import { OwnedResources } from '../access/owned-resources.js';
import type { AnyEventDefinition } from '../events/define-event.js';
import type { AnyModuleJob } from './jobs.js';
import type { MigrationEntry, ModuleManifest, ModuleWorker, OutboxConsumer } from './module.js';
import { UsageRegistry, type UsageReporter } from './usage.js';

/** The process's view of its modules: every list a manifest contributes to, merged. */
export interface ModuleRegistry {
  modules: readonly ModuleManifest[];
  entities: readonly EntityName[];
  migrations: readonly MigrationEntry[];
  jobs: readonly AnyModuleJob[];
  workers: readonly ModuleWorker[];
  events: ReadonlyMap<string, AnyEventDefinition>;
  outboxConsumers: readonly OutboxConsumer[];
  ownedResources: OwnedResources;
  usage: UsageRegistry;
  usageReporters: readonly UsageReporter[];
}

function unique<T>(items: T[], key: (t: T) => string, what: string): T[] {
  const seen = new Set<string>();
  for (const item of items) {
    const k = key(item);
    if (seen.has(k)) throw new Error(`${what} ${k} is declared twice`);
    seen.add(k);
  }
  return items;
}

/** Merges the manifests; a name declared twice (job, event, worker, migration, module) is an error at start. */
export function buildRegistry(modules: readonly ModuleManifest[]): ModuleRegistry {
  unique([...modules], (m) => m.name, 'module');
  const all = <K extends keyof ModuleManifest>(key: K) =>
    modules.flatMap((m) => (m[key] ?? []) as NonNullable<ModuleManifest[K]> & unknown[]);
  const migrations = unique(all('migrations') as MigrationEntry[], (m) => m.name, 'migration').sort((a, b) =>
    a.name.localeCompare(b.name),
  );
  const events = unique(all('events') as AnyEventDefinition[], (e) => e.type, 'event');
  return {
    modules,
    entities: [...new Set(all('entities') as EntityName[])],
    migrations,
    jobs: unique(all('jobs') as AnyModuleJob[], (j) => j.name, 'job'),
    workers: unique(all('workers') as ModuleWorker[], (w) => w.name, 'worker'),
    events: new Map(events.map((e) => [e.type, e])),
    outboxConsumers: unique(all('outboxConsumers') as OutboxConsumer[], (c) => c.name, 'outbox consumer'),
    ownedResources: new OwnedResources(modules.flatMap((m) => m.ownedResources ?? [])),
    usage: new UsageRegistry(modules.flatMap((m) => m.usage ?? [])),
    usageReporters: reporters(modules),
  };
}

/** The modules' usage reporters; a measure reported by two modules is an error at start. */
function reporters(modules: readonly ModuleManifest[]): UsageReporter[] {
  const out = modules.flatMap((m) => (m.usageReport ? [m.usageReport] : []));
  unique(
    out.flatMap((r) => [...r.metrics]),
    (m) => m,
    'usage metric',
  );
  return out;
}
