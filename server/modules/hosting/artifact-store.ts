import { createHash, randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { lstat, mkdir, open, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join, posix, relative, resolve, sep } from 'node:path';
import { brotliCompressSync, constants as zlib, gzipSync } from 'node:zlib';

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

const MANIFEST_ID = /^dep_[A-Za-z0-9]+$/;
const CONTENT_FILE = /^([0-9a-f]{64})(\.br|\.gz)?$/;

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
    const walk = async (d: string): Promise<void> => {
      for (const entry of await readdir(d, { withFileTypes: true })) {
        const full = join(d, entry.name);
        const rel = relative(root, full).split(sep).join(posix.sep);
        // lstat, not stat: a link is never followed, wherever it points.
        const st = await lstat(full);
        if (st.isDirectory()) await walk(full);
        else if (st.isFile()) {
          bytes += st.size;
          if (bytes > this.maxBytes) {
            throw new ArtifactError(
              `The output is larger than the limit of ${Math.round(this.maxBytes / 1e6)} MB`,
            );
          }
          files[`/${rel}`] = await this.storeFile(full, rel);
        } else skipped.push(rel);
      }
    };
    await walk(root);
    const manifest: ArtifactManifest = { deploymentId, files, bytes };
    await mkdir(this.manifests, { recursive: true });
    const target = this.manifestPath(deploymentId);
    const tmp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
    await writeFile(tmp, JSON.stringify(manifest));
    await rename(tmp, target);
    return { manifest, skipped };
  }

  /** Hashes a file, then stores it under its hash unless that content is already there. */
  private async storeFile(full: string, rel: string): Promise<ArtifactFile> {
    const hash = createHash('sha256');
    // O_NOFOLLOW: the file was checked with lstat; a link swapped in since then is refused.
    const fh = await open(full, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    let content: Buffer;
    try {
      content = await fh.readFile();
    } finally {
      await fh.close();
    }
    hash.update(content);
    const h = hash.digest('hex');
    const target = this.contentPath(h);
    const encodings: ('br' | 'gzip')[] = [];
    const compressible = COMPRESSIBLE.test(rel) && content.length >= COMPRESS_MIN_BYTES;
    // A content already there is reused and marked recent (a collection running meanwhile leaves it: collectGarbage).
    const now = new Date();
    const reused = await utimes(target, now, now).then(
      () => true,
      () => false,
    );
    if (reused) {
      for (const variant of [`${target}.br`, `${target}.gz`])
        await utimes(variant, now, now).catch(() => undefined);
    } else {
      await mkdir(join(this.objects, h.slice(0, 2)), { recursive: true });
      await writeAtomically(target, content);
      if (compressible) {
        const br = brotliCompressSync(content, { params: { [zlib.BROTLI_PARAM_QUALITY]: 9 } });
        const gz = gzipSync(content, { level: 9 });
        if (br.length < content.length) await writeAtomically(`${target}.br`, br);
        if (gz.length < content.length) await writeAtomically(`${target}.gz`, gz);
      }
    }
    if (compressible) {
      if (await exists(`${target}.br`)) encodings.push('br');
      if (await exists(`${target}.gz`)) encodings.push('gzip');
    }
    return { hash: h, size: content.length, ...(encodings.length ? { encodings } : {}) };
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

async function writeAtomically(target: string, content: Buffer): Promise<void> {
  const tmp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(tmp, content, { mode: 0o644 });
  await rename(tmp, target);
}
