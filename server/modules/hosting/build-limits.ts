import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chown, mkdir, readdir, readFile, readlink, rmdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The memory and disk limits of a real build (docs/hosting.md, "The sandbox"): a cgroup of its own for memory
 * (`BUILD_MEMORY_LIMIT`), and the sum of every file of its directory, measured while it runs, for disk
 * (`BUILD_DISK_LIMIT`).
 */

/** `1.5 GiB`, `200 MiB`: a size as the log says it. */
export function formatBytes(n: number): string {
  for (const [unit, size] of [
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const) {
    if (n >= size) return `${Number((n / size).toFixed(1))} ${unit}`;
  }
  return `${n} bytes`;
}

/** Where this process's memory cgroup is, and which version; undefined where there is none it may use. */
interface CgroupBase {
  version: 1 | 2;
  dir: string;
}

/** The prefix of every build's cgroup: a start removes those of its builds that a crash left. */
const CGROUP_PREFIX = 'cloud-platform-build-';

let base: CgroupBase | null | undefined;

/** This process's memory cgroup, if it can make cgroups under it (checked once per process). */
export function memoryCgroupBase(): CgroupBase | undefined {
  if (base !== undefined) return base ?? undefined;
  base = null;
  let lines: string[];
  try {
    lines = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  } catch {
    return undefined;
  }
  // cgroup v1: a line `N:memory:/path` and the controller mounted at /sys/fs/cgroup/memory.
  const v1 = lines.map((l) => l.split(':')).find((p) => p[1]?.split(',').includes('memory'));
  if (v1 && existsSync('/sys/fs/cgroup/memory/cgroup.procs')) {
    const dir = join('/sys/fs/cgroup/memory', v1.slice(2).join(':'));
    if (existsSync(join(dir, 'memory.limit_in_bytes'))) base = { version: 1, dir };
  } else {
    // cgroup v2: the line `0::/path`, with the memory controller given to the children of that cgroup.
    const v2 = lines.find((l) => l.startsWith('0::'));
    for (const mount of ['/sys/fs/cgroup', '/sys/fs/cgroup/unified']) {
      if (!v2 || !existsSync(join(mount, 'cgroup.controllers'))) continue;
      const dir = join(mount, v2.slice(3));
      try {
        if (readFileSync(join(dir, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('memory')) {
          base = { version: 2, dir };
        }
      } catch {
        // Not this mount.
      }
      break;
    }
  }
  return base ?? undefined;
}

/** A build's own memory cgroup: made before it starts, removed after it ends. */
export class BuildCgroup {
  private constructor(
    private readonly base: CgroupBase,
    readonly dir: string,
  ) {}

  /** The file a process writes its own pid to, to join. */
  get procs(): string {
    return join(this.dir, 'cgroup.procs');
  }

  /**
   * A cgroup limited to `bytes` (swap included where the host counts it), which the build's user may join; undefined
   * where the host gives none (no cgroup, or not allowed to make one).
   */
  static async create(name: string, bytes: number, uid?: number): Promise<BuildCgroup | undefined> {
    const b = memoryCgroupBase();
    if (!b) return undefined;
    const dir = join(b.dir, `${CGROUP_PREFIX}${name}`);
    try {
      await mkdir(dir);
      if (b.version === 1) {
        await writeFile(join(dir, 'memory.limit_in_bytes'), String(bytes));
        // Without it, swap would let a build go past its limit (memory+swap, set after memory).
        if (existsSync(join(dir, 'memory.memsw.limit_in_bytes')))
          await writeFile(join(dir, 'memory.memsw.limit_in_bytes'), String(bytes));
      } else {
        await writeFile(join(dir, 'memory.max'), String(bytes));
        if (existsSync(join(dir, 'memory.swap.max'))) await writeFile(join(dir, 'memory.swap.max'), '0');
      }
      if (uid !== undefined) await chown(join(dir, 'cgroup.procs'), uid, uid);
      return new BuildCgroup(b, dir);
    } catch {
      await rmdir(dir).catch(() => undefined);
      return undefined;
    }
  }

  /** Whether the kernel killed a process of it for want of memory. */
  async outOfMemory(): Promise<boolean> {
    const file = this.base.version === 1 ? 'memory.oom_control' : 'memory.events';
    const text = await readFile(join(this.dir, file), 'utf8').catch(() => '');
    const kills = /^oom_kill (\d+)$/m.exec(text);
    if (kills) return Number(kills[1]) > 0;
    // Kernels without the count: the limit was reached (v1 failcnt counts reclaims too; a fallback only).
    const fail = await readFile(join(this.dir, 'memory.failcnt'), 'utf8').catch(() => '0');
    return Number(fail.trim()) > 0;
  }

  /** The pids in it (host pids). */
  async pids(): Promise<number[]> {
    const text = await readFile(this.procs, 'utf8').catch(() => '');
    return text.split('\n').filter(Boolean).map(Number);
  }

  /** Removes it once its processes are gone (they die with the build; a few tries while the kernel reaps them). */
  async remove(): Promise<void> {
    for (let i = 0; i < 50; i++) {
      try {
        await rmdir(this.dir);
        return;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
        for (const pid of await this.pids()) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // Gone.
          }
        }
        await sleep(20);
      }
    }
  }
}

/** Removes the cgroups of builds a crash of this API left (empty ones only: rmdir refuses the others). */
export async function removeStaleCgroups(isLive: (name: string) => boolean): Promise<void> {
  const b = memoryCgroupBase();
  if (!b) return;
  const entries = await readdir(b.dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) {
    if (!e.isDirectory() || !e.name.startsWith(CGROUP_PREFIX)) continue;
    if (isLive(e.name.slice(CGROUP_PREFIX.length))) continue;
    await rmdir(join(b.dir, e.name)).catch(() => undefined);
  }
}

/**
 * Bytes on disk of every file under `dir` (blocks, as `du` counts them: a sparse file costs what it holds, a hard
 * link once), never following a link; files the build deleted but still holds open count too when its processes are
 * known (`pids`). Undefined when it could not be measured.
 */
export async function diskUsage(dir: string, pids: number[] = []): Promise<number | undefined> {
  const tree = await new Promise<number | undefined>((resolve) => {
    const du = spawn('du', ['-s', '-x', '-P', '-B1', '--', dir], { stdio: ['ignore', 'pipe', 'ignore'] });
    let text = '';
    du.stdout.on('data', (c: Buffer) => (text += c.toString()));
    du.on('error', () => resolve(undefined));
    // du exits 1 when a file went away while it walked: its sum is still good.
    du.on('close', () => {
      const n = Number(text.split('\t')[0]);
      resolve(Number.isFinite(n) && text ? n : undefined);
    });
  });
  if (tree === undefined) return undefined;
  let deleted = 0;
  const seen = new Set<string>();
  for (const pid of pids) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
    for (const fd of fds) {
      const path = `/proc/${pid}/fd/${fd}`;
      const target = await readlink(path).catch(() => '');
      if (!target.endsWith(' (deleted)')) continue;
      const st = await stat(path).catch(() => undefined);
      if (!st?.isFile() || seen.has(`${st.dev}:${st.ino}`)) continue;
      seen.add(`${st.dev}:${st.ino}`);
      deleted += st.blocks * 512;
    }
  }
  return tree + deleted;
}

/**
 * Measures a build's directory again and again while it runs, and calls `over` once its files pass `limit`. The
 * next measure comes `interval` after the last one ended, longer when a measure takes long (a large tree), so that
 * the watch never takes more than a fifth of a core.
 */
export function watchDisk(
  dir: string,
  limit: number,
  over: (bytes: number) => void,
  pids: () => Promise<number[]>,
  interval = 250,
): { stop(): void } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const tick = async () => {
    const started = Date.now();
    const used = await diskUsage(dir, await pids());
    if (stopped) return;
    if (used !== undefined && used > limit) {
      stopped = true;
      over(used);
      return;
    }
    timer = setTimeout(() => void tick(), Math.max(interval, (Date.now() - started) * 4));
  };
  timer = setTimeout(() => void tick(), interval);
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
