import { availableParallelism } from 'node:os';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';

export interface PasswordHasherOptions {
  /** bcrypt cost factor (`BCRYPT_COST`). */
  cost: number;
  /** Worker threads at most (default: one per core). */
  threads?: number;
  /** A worker exits after this long without work (default 30 s), so an idle server holds none. */
  idleTimeoutMs?: number;
}

/**
 * bcrypt (bcryptjs) on a pool of worker threads. One hash costs about a quarter of a second of CPU at cost 12: on
 * the request thread it would use one core only and slow every other request while logins run. Workers start on
 * first use and leave when idle; each runs Node without tsx (the worker file is plain type-annotated TypeScript)
 * and with a small heap.
 */
export class PasswordHasher {
  private readonly pool: Piscina;
  private dummy: Promise<string> | undefined;

  constructor(private readonly opts: PasswordHasherOptions) {
    this.pool = new Piscina({
      // Beside this module: password-worker.ts when run from the sources, .js when built (npm start).
      filename: new URL(`./password-worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url).href,
      minThreads: 0,
      maxThreads: Math.max(1, opts.threads ?? availableParallelism()),
      idleTimeout: opts.idleTimeoutMs ?? 30_000,
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2 },
    });
  }

  hash(password: string): Promise<string> {
    return this.pool.run({ password, cost: this.opts.cost }, { name: 'hash' }) as Promise<string>;
  }

  compare(password: string, hash: string): Promise<boolean> {
    return this.pool.run({ password, hash }, { name: 'compare' }) as Promise<boolean>;
  }

  /**
   * Compares against a fixed hash of the configured cost: for an unknown email, so that both failures of a login
   * take the same time. Made once, on first use.
   */
  compareWithDummy(password: string): Promise<boolean> {
    this.dummy ??= this.hash('not-a-real-password-0123456789').catch((err: unknown) => {
      this.dummy = undefined;
      throw err;
    });
    return this.dummy.then((h) => this.compare(password, h));
  }

  /** Waits for running hashes and stops the workers. */
  close(): Promise<void> {
    return this.pool.close();
  }
}
