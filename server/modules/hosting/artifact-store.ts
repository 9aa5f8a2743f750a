import { createHash, randomBytes } from 'node:crypto';
import { constants as fsConstants, createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, open, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join, posix, relative, resolve, sep } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { constants as zlib, createBrotliCompress, createGzip } from 'node:zlib';

/**
 * Where the output of successful builds is kept (docs/hosting.md, "Artifacts"): immutable, each file stored once by
 * the SHA-256 of its content whatever deployment (or organization) it came from, and a manifest per deployment
 * mapping its paths to contents. The edge serves from it; several API processes share one store (a shared
 * directory). Behind an interface so that an object store can take its place.
 */
export interface ArtifactFile {
  /** SHA-256 of the content, hex. */
  hash: string;
  size: number;
  /** Precompressed variants kept next to the content (compressible types only). */
  encodings?: ('br' | 'gzip')[];
}

export interface ArtifactManifest {
  deploymentId: string;
  /** Path inside the site (`/index.html`, `/assets/app.1a2b.js`) → content. */
  files: Record<string, ArtifactFile>;
  bytes: number;
}

export interface ArtifactStore {
  /**
   * Collects `dir` (regular files only; symbolic links are skipped, never followed) as the artifact of
   * `deploymentId`. Throws ArtifactError past the size limit. Writing the same deployment twice keeps the first.
   */
  put(deploymentId: string, dir: string): Promise<{ manifest: ArtifactManifest; skipped: string[] }>;
  manifest(deploymentId: string): Promise<ArtifactManifest | null>;
  /** The file holding a content (or one of its precompressed variants), for serving. */
  contentPath(hash: string, encoding?: 'br' | 'gzip'): string;
  /** Removes the artifact of a deployment (its manifest); contents other deployments share stay. */
  remove(deploymentId: string): Promise<void>;
  /** The deployments that have an artifact here. */
  deploymentIds(): Promise<string[]>;
  /**
   * Removes the contents no manifest refers to any more (after {@link remove}); returns how many went. A content
   * written or reused within the grace period stays, for a build storing its artifact meanwhile.
   */
  collectGarbage(): Promise<number>;
}

export class ArtifactError extends Error {
  override name = 'ArtifactError';
}

/** Types worth compressing ahead of time (the edge serves the variant a client accepts). */
const COMPRESSIBLE = /\.(html?|css|m?js|json|svg|txt|xml|map|wasm|ico|webmanifest)$/i;
const COMPRESS_MIN_BYTES = 1024;
/**
 * Larger files are stored as they are (served uncompressed): compressing them would hold the thread pool for seconds
 * per file, and what a site serves compressed is its pages, scripts and styles, far smaller than this.
 */
export const COMPRESS_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Limits of one artifact beside its bytes (docs/hosting.md, "Artifacts"): they bound its manifest (which the edge
 * reads and keeps in memory) to a few megabytes.
 */
export const ARTIFACT_LIMITS = {
  /** Files of one deployment. */
  files: 20_000,
  /** Entries walked (files, directories, links and others together). */
  entries: 50_000,
  /** Bytes of a path inside the artifact (`/assets/app.js`). */
  pathBytes: 1024,
} as const;

const MANIFEST_ID = /^dep_[A-Za-z0-9]+$/;
const CONTENT_FILE = /^([0-9a-f]{64})(\.br|\.gz)?$/;
const INCOMING_FILE = /^incoming-[0-9a-f]+\.tmp$/;

/** How long a content written or reused stays, referenced or not: longer than a build takes to store its output. */
const GARBAGE_GRACE_MS = 15 * 60_000;

export class DirectoryArtifactStore implements ArtifactStore {
  private readonly objects: string;
  private readonly manifests: string;

  constructor(
    root: string,
    private readonly maxBytes: number,
    private readonly graceMs = GARBAGE_GRACE_MS,
  ) {
    this.objects = join(resolve(root), 'objects');
    this.manifests = join(resolve(root), 'manifests');
  }

  contentPath(hash: string, encoding?: 'br' | 'gzip'): string {
    const base = join(this.objects, hash.slice(0, 2), hash);
    return encoding === 'br' ? `${base}.br` : encoding === 'gzip' ? `${base}.gz` : base;
  }

  private manifestPath(deploymentId: string): string {
    if (!MANIFEST_ID.test(deploymentId)) throw new ArtifactError('invalid deployment id');
    return join(this.manifests, `${deploymentId}.json`);
  }

  async manifest(deploymentId: string): Promise<ArtifactManifest | null> {
    try {
      return JSON.parse(await readFile(this.manifestPath(deploymentId), 'utf8')) as ArtifactManifest;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async remove(deploymentId: string): Promise<void> {
    // Contents stay: other deployments may share them.
    await rm(this.manifestPath(deploymentId), { force: true });
  }

  async deploymentIds(): Promise<string[]> {
    const names = await readdir(this.manifests).catch(() => [] as string[]);
    return names
      .filter((n) => n.endsWith('.json'))
      .map((n) => n.slice(0, -'.json'.length))
      .filter((id) => MANIFEST_ID.test(id));
  }

  async collectGarbage(): Promise<number> {
    const used = new Set<string>();
    const names = await readdir(this.manifests).catch(() => [] as string[]);
    for (const name of names) {
      if (!name.endsWith('.json')) continue;
      const m = await this.manifest(name.slice(0, -'.json'.length)).catch(() => null);
      for (const f of Object.values(m?.files ?? {})) used.add(f.hash);
    }
    const before = Date.now() - this.graceMs;
    let removed = 0;
    for (const prefix of await readdir(this.objects).catch(() => [] as string[])) {
      const dir = join(this.objects, prefix);
      if (INCOMING_FILE.test(prefix)) {
        // A copy a stopped process left half-stored.
        const st = await stat(dir).catch(() => undefined);
        if (st && st.mtimeMs <= before) await rm(dir, { force: true });
        continue;
      }
      for (const name of await readdir(dir).catch(() => [] as string[])) {
        const hash = CONTENT_FILE.exec(name)?.[1];
        if (!hash || used.has(hash)) continue;
        const path = join(dir, name);
        const st = await stat(path).catch(() => undefined);
        if (!st || st.mtimeMs > before) continue;
        await rm(path, { force: true });
        removed += 1;
      }
    }
    return removed;
  }

  async put(deploymentId: string, dir: string): Promise<{ manifest: ArtifactManifest; skipped: string[] }> {
    const existing = await this.manifest(deploymentId);
    if (existing) return { manifest: existing, skipped: [] };
    const root = resolve(dir);
    const files: Record<string, ArtifactFile> = {};
    const skipped: string[] = [];
    let bytes = 0;
    let count = 0;
    let entries = 0;
    const walk = async (d: string): Promise<void> => {
      for (const entry of await readdir(d, { withFileTypes: true })) {
        entries += 1;
        if (entries > ARTIFACT_LIMITS.entries) {
          throw new ArtifactError(
            `The output has more than ${ARTIFACT_LIMITS.entries.toLocaleString('en-US')} entries (files and directories), the limit of an artifact`,
          );
        }
        const full = join(d, entry.name);
        const rel = relative(root, full).split(sep).join(posix.sep);
        if (Buffer.byteLength(rel) + 1 > ARTIFACT_LIMITS.pathBytes) {
          throw new ArtifactError(
            `The output has a path longer than ${ARTIFACT_LIMITS.pathBytes} bytes, the limit of an artifact: ${rel.slice(0, 80)}…`,
          );
        }
        // lstat, not stat: a link is never followed, wherever it points.
        const st = await lstat(full);
        if (st.isDirectory()) await walk(full);
        else if (st.isFile()) {
          count += 1;
          if (count > ARTIFACT_LIMITS.files) {
            throw new ArtifactError(
              `The output has more than ${ARTIFACT_LIMITS.files.toLocaleString('en-US')} files, the limit of an artifact`,
            );
          }
          bytes += st.size;
          if (bytes > this.maxBytes) throw tooLarge();
          found.push({ full, rel });
        } else skipped.push(rel);
      }
    };
    const tooLarge = () =>
      new ArtifactError(
        `The output is larger than the limit of ${Math.round(this.maxBytes / 1e6)} MB (ARTIFACT_MAX_MB)`,
      );
    // Every limit is checked before anything is stored: an output over one costs a walk, not a copy.
    const found: { full: string; rel: string }[] = [];
    await walk(root);
    bytes = 0;
    for (const { full, rel } of found) {
      const file = await this.storeFile(full, rel);
      // What was read, in case a file grew since the walk.
      bytes += file.size;
      if (bytes > this.maxBytes) throw tooLarge();
      files[`/${rel}`] = file;
    }
    const manifest: ArtifactManifest = { deploymentId, files, bytes };
    await mkdir(this.manifests, { recursive: true });
    const target = this.manifestPath(deploymentId);
    const tmp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
    await writeFile(tmp, JSON.stringify(manifest));
    await rename(tmp, target);
    return { manifest, skipped };
  }

  /**
   * Hashes a file while copying it into the store (one read, in chunks: never the whole file in memory), then keeps
   * the copy under its hash unless that content is already there. Precompressed variants are made by zlib's streams,
   * whose work runs on the thread pool: storing an artifact never blocks the event loop.
   */
  private async storeFile(full: string, rel: string): Promise<ArtifactFile> {
    await mkdir(this.objects, { recursive: true });
    const incoming = join(this.objects, `incoming-${randomBytes(8).toString('hex')}.tmp`);
    const hash = createHash('sha256');
    let size = 0;
    // O_NOFOLLOW: the file was checked with lstat; a link swapped in since then is refused.
    const fh = await open(full, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    try {
      await pipeline(
        fh.createReadStream({ highWaterMark: 256 * 1024 }),
        new Transform({
          transform(chunk: Buffer, _encoding, done) {
            hash.update(chunk);
            size += chunk.length;
            done(null, chunk);
          },
        }),
        createWriteStream(incoming, { mode: 0o644 }),
      );
    } catch (err) {
      await rm(incoming, { force: true });
      throw err;
    } finally {
      await fh.close().catch(() => undefined);
    }
    const h = hash.digest('hex');
    const target = this.contentPath(h);
    const encodings: ('br' | 'gzip')[] = [];
    const compressible = COMPRESSIBLE.test(rel) && size >= COMPRESS_MIN_BYTES && size <= COMPRESS_MAX_BYTES;
    // A content already there is reused and marked recent (a collection running meanwhile leaves it: collectGarbage).
    const now = new Date();
    const reused = await utimes(target, now, now).then(
      () => true,
      () => false,
    );
    if (reused) {
      await rm(incoming, { force: true });
      for (const variant of [`${target}.br`, `${target}.gz`])
        await utimes(variant, now, now).catch(() => undefined);
    } else {
      await mkdir(join(this.objects, h.slice(0, 2)), { recursive: true });
      await rename(incoming, target);
      if (compressible) {
        await compressInto(target, `${target}.br`, size, () =>
          createBrotliCompress({
            params: { [zlib.BROTLI_PARAM_QUALITY]: 9, [zlib.BROTLI_PARAM_SIZE_HINT]: size },
          }),
        );
        await compressInto(target, `${target}.gz`, size, () => createGzip({ level: 9 }));
      }
    }
    if (compressible) {
      if (await exists(`${target}.br`)) encodings.push('br');
      if (await exists(`${target}.gz`)) encodings.push('gzip');
    }
    return { hash: h, size, ...(encodings.length ? { encodings } : {}) };
  }
}

/**
 * Writes a compressed copy of `source` next to it, streamed (zlib's work runs on the thread pool, not the event
 * loop); kept only when smaller than the original.
 */
async function compressInto(
  source: string,
  target: string,
  size: number,
  compressor: () => NodeJS.ReadWriteStream,
): Promise<void> {
  const tmp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await pipeline(createReadStream(source), compressor(), createWriteStream(tmp, { mode: 0o644 }));
    if ((await stat(tmp)).size < size) await rename(tmp, target);
  } finally {
    await rm(tmp, { force: true });
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
