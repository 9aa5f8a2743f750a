// Test tier: server
import { Agent, request } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect } from 'chai';
import { startTestServer, type TestServer } from '../support/server.js';
import { createOrg } from '../support/factories.js';

// The SDK's path must not keep anything per call (docs/benchmarks.md, "Benchmarks"): a few thousand /trpc calls, single and
// batched, then the heap after forced full collections is compared with the heap before them, with a generous bound
// (caches warm up, the allocator keeps some slack) that a leak of a few KB per call exceeds. What each call used to
// leave behind under load (a Fetch `Request`'s finalizer record holding the call's abort signal and its listeners,
// about 0.6 KB, released only as fast as finalizers run) is too small to see here within that bound once the
// finalizers have run, so the test also checks its cause directly: no Fetch `Request` is built for these calls.
// The heap is the whole test process's, which other suites' servers share (their jobs and timers run meanwhile):
// the calls run in two equal rounds, and a leak grows the heap in both, where such noise grows it in one at most.

/** Node's `gc()`, exposed at run time (the test run has no --expose-gc). */
function exposeGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

const SINGLE_CALLS = 1_000;
const BATCHES = 250;
const ROUNDS = 2;
const CONCURRENCY = 16;
const MAX_GROWTH_BYTES = 4 * 1024 * 1024;

describe('/trpc soak: no heap kept per call (server/trpc/http.ts)', function () {
  this.timeout(60_000);
  let s: TestServer;
  let token: string;
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });

  before(async () => {
    s = await startTestServer({ env: { RATE_LIMIT_BURST: '1000000' } });
    token = (await createOrg(s.deps, { plan: 'enterprise' })).token;
  });
  after(async () => {
    agent.destroy();
    await s?.close();
  });

  /** One GET on a kept-alive connection; resolves with the status once the body is read. */
  const get = (path: string) =>
    new Promise<number>((resolve, reject) => {
      const req = request(
        `${s.baseUrl}${path}`,
        { agent, headers: { authorization: `Bearer ${token}` } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end();
    });

  const batchInput = encodeURIComponent(JSON.stringify({ 1: { limit: 5 } }));
  const paths = (singles: number, batches: number) => [
    ...Array.from({ length: singles }, () => '/trpc/auth.me'),
    ...Array.from(
      { length: batches },
      () => `/trpc/auth.me,vpn.connections.list?batch=1&input=${batchInput}`,
    ),
  ];

  /** Runs every path, CONCURRENCY at a time; returns the statuses seen other than 200. */
  async function run(all: string[]): Promise<number[]> {
    const failed: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < all.length) {
          const status = await get(all[next++]!);
          if (status !== 200) failed.push(status);
        }
      }),
    );
    return failed;
  }

  /** Heap in use after full collections, with the turns between them that let finalizers run. */
  async function settledHeap(gc: () => void): Promise<number> {
    for (let i = 0; i < 4; i++) {
      gc();
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setTimeout(r, 20));
    }
    return process.memoryUsage().heapUsed;
  }

  it('keeps the heap flat over thousands of single and batched calls, building no Fetch Request for them', async () => {
    const gc = exposeGc();
    // Warm-up: connections, prepared statements, caches and compiled code.
    expect(await run(paths(300, 100))).to.deep.equal([]);
    const heaps = [await settledHeap(gc)];
    // The client uses node:http, so every Fetch `Request` built meanwhile is the server's.
    const FetchRequest = globalThis.Request;
    let built = 0;
    globalThis.Request = class CountedRequest extends FetchRequest {
      constructor(...args: ConstructorParameters<typeof FetchRequest>) {
        super(...args);
        built++;
      }
    };
    try {
      for (let round = 0; round < ROUNDS; round++) {
        expect(await run(paths(SINGLE_CALLS, BATCHES))).to.deep.equal([]);
        heaps.push(await settledHeap(gc));
      }
    } finally {
      globalThis.Request = FetchRequest;
    }
    expect(built, 'Fetch Requests built by the server').to.equal(0);
    const growths = heaps.slice(1).map((h, i) => h - heaps[i]!);
    const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;
    expect(
      Math.min(...growths),
      `heap after full GC grew by ${growths.map(mb).join(' and ')} over two rounds of ${SINGLE_CALLS + 2 * BATCHES} calls`,
    ).to.be.below(MAX_GROWTH_BYTES);
  });
});
