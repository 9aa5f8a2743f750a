import { createHash, randomBytes } from 'node:crypto';
import {
  DEFAULT_DB_NAME,
  DEFAULT_DB_USER,
  ENGINE_PORTS,
  SIZE_SPECS,
  type DatabaseEngine,
  type DatabaseRegion,
  type DatabaseSize,
} from './databases.constants.js';
import type {
  DatabaseDriver,
  DatabaseInstance,
  DriverOperation,
  InstanceMetrics,
  Placement,
} from './databases.driver.js';

/**
 * The built-in database hosts (docs/databases.md, "Databases", Simulation). Nothing runs anywhere: every change is done after
 * `PROVISIONING_DELAY_MS`, and the load of an instance is a function of its id and the time, so that the same
 * instance at the same instant always shows the same figures:
 *
 * - each figure is a base level drawn from the id plus two sine waves (periods of hours and of minutes, with phases
 *   drawn from the id), so it moves smoothly and never jumps; clamped to 0–100 and rounded;
 * - CPU: base 10–40 %, ±15 over 4–8 h, ±5 over 11–18 min; memory: base 35–60 %, ±10 over 9–15 h, ±3 over 20–40 min;
 *   storage: base 8–48 %, ±4 over 3–6 days;
 * - active connections: `max × (0.05 + 0.8 × cpu / 100)`, rounded;
 * - a backup holds 60 % of the storage in use when it completes.
 */
export class SimulatedDatabaseDriver implements DatabaseDriver {
  private readonly seeds = new Map<string, number[]>();

  constructor(private readonly delayMs: number) {}

  /** One place, on a host named `<name>-<random>.<region>.db.example.com`. */
  placements(spec: { name: string; engine: DatabaseEngine; region: DatabaseRegion }): Placement[] {
    // A DNS label has at most 63 characters: the name is shortened to leave room for `-` and 8 random ones.
    const label = spec.name.slice(0, 54).replace(/-+$/, '');
    return [
      {
        server: null,
        host: `${label}-${randomLabel(8)}.${spec.region}.db.example.com`,
        port: ENGINE_PORTS[spec.engine],
        dbName: DEFAULT_DB_NAME,
        dbUser: DEFAULT_DB_USER,
      },
    ];
  }

  passwordVerifier(): null {
    return null;
  }

  async provision(): Promise<DriverOperation> {
    return { readyInMs: this.delayMs };
  }

  async create(): Promise<void> {}

  async resize(): Promise<DriverOperation> {
    return { readyInMs: this.delayMs };
  }

  async applySize(): Promise<void> {}

  async setPassword(): Promise<void> {}

  async startBackup(): Promise<DriverOperation> {
    return { readyInMs: this.delayMs };
  }

  async runBackup(instance: DatabaseInstance, _backupId: string, at: Date): Promise<number> {
    const { storageUsage } = this.metricsAt(instance, at);
    return Math.round(SIZE_SPECS[instance.size].storageGb * 1e9 * (storageUsage / 100) * 0.6);
  }

  async deleteBackup(): Promise<void> {}

  async destroy(): Promise<void> {}

  async metrics(instance: DatabaseInstance, at: Date): Promise<InstanceMetrics> {
    return this.metricsAt(instance, at);
  }

  async storageBytes(): Promise<null> {
    return null;
  }

  async setReadOnly(): Promise<void> {}

  async close(): Promise<void> {}

  /** The load at `at`, computed (the same for the same id, size and instant). */
  metricsAt(instance: { id: string; size: DatabaseSize }, at: Date): InstanceMetrics {
    return this.load(instance.id, instance.size, at);
  }

  private load(id: string, size: DatabaseSize, at: Date): InstanceMetrics {
    const s = this.seedsOf(id);
    const t = at.getTime() / 1000;
    const wave = (amplitude: number, periodSec: number, phase: number) =>
      amplitude * Math.sin((2 * Math.PI * t) / periodSec + 2 * Math.PI * phase);
    const pct = (v: number) => Math.min(100, Math.max(0, Math.round(v)));
    const cpu = pct(
      10 + 30 * s[0]! + wave(15, 3600 * (4 + 4 * s[1]!), s[2]!) + wave(5, 60 * (11 + 7 * s[3]!), s[4]!),
    );
    const memory = pct(
      35 + 25 * s[5]! + wave(10, 3600 * (9 + 6 * s[6]!), s[7]!) + wave(3, 60 * (20 + 20 * s[8]!), s[9]!),
    );
    const storage = pct(8 + 40 * s[10]! + wave(4, 86400 * (3 + 3 * s[11]!), s[12]!));
    const max = SIZE_SPECS[size].maxConnections;
    const active = Math.min(max, Math.max(0, Math.round(max * (0.05 + (0.8 * cpu) / 100))));
    return { cpuUsage: cpu, memoryUsage: memory, storageUsage: storage, activeConnections: active };
  }

  /** Sixteen numbers in [0, 1) drawn from the id (two bytes each of its SHA-256). */
  private seedsOf(id: string): number[] {
    let s = this.seeds.get(id);
    if (!s) {
      const digest = createHash('sha256').update(id).digest();
      s = Array.from({ length: 16 }, (_, i) => digest.readUInt16BE(i * 2) / 65536);
      if (this.seeds.size >= 10_000) this.seeds.clear();
      this.seeds.set(id, s);
    }
    return s;
  }
}

const LABEL_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

function randomLabel(n: number): string {
  let out = '';
  for (const b of randomBytes(n)) out += LABEL_ALPHABET[b % 36];
  return out;
}
