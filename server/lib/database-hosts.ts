import { readFileSync } from 'node:fs';

/**
 * The real database servers of `DATABASE_HOSTS` (docs/databases.md, "Databases", Real servers; docs/deploying.md): one entry
 * per server, `<engine>@<region>=<admin URL>`, comma-separated. `?drain` (or `&drain`) at the end of an admin URL
 * keeps that server's databases running but places no new one there.
 *
 * The admin URL is a secret: it is kept only in `adminUrl`, and no message of this file repeats it.
 */
export interface DatabaseHost {
  /** `<engine>@<region>/<host>:<port>`: what a database row records of where it lives (no credentials). */
  key: string;
  engine: 'postgresql' | 'mysql';
  /** A region code (the databases module refuses one it does not know). */
  region: string;
  /** The host and port customers connect to (those of the admin URL). */
  host: string;
  port: number;
  /** Takes no new databases. */
  drain: boolean;
  adminUrl: string;
}

const SCHEMES: Record<string, DatabaseHost['engine']> = {
  'postgres:': 'postgresql',
  'postgresql:': 'postgresql',
  'mysql:': 'mysql',
  'mariadb:': 'mysql',
};

/** Parses a `DATABASE_HOSTS` value; throws an Error listing the problems (entries by position, never their URL). */
export function parseDatabaseHosts(text: string): DatabaseHost[] {
  const problems: string[] = [];
  const hosts: DatabaseHost[] = [];
  const entries = text
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter(Boolean);
  entries.forEach((entry, i) => {
    const where = `entry ${i + 1}`;
    const m = /^([a-z]+)@([a-z0-9-]+)=(.+)$/.exec(entry);
    if (!m) {
      problems.push(`${where} must be <engine>@<region>=<admin URL>`);
      return;
    }
    const [, engine, region, rawUrl] = m as unknown as [string, string, string, string];
    if (engine === 'mongodb') {
      problems.push(`${where}: mongodb has no real driver (docs/databases.md, "Databases"); leave it out`);
      return;
    }
    if (engine !== 'postgresql' && engine !== 'mysql') {
      problems.push(`${where}: engine must be postgresql or mysql`);
      return;
    }
    let url: URL;
    try {
      url = new URL(rawUrl);
    } catch {
      problems.push(`${where}: the admin URL is not a URL`);
      return;
    }
    if (SCHEMES[url.protocol] !== engine) {
      problems.push(
        `${where}: a ${engine} server needs a ${engine === 'mysql' ? 'mysql' : 'postgres'}:// URL`,
      );
      return;
    }
    const drain = url.searchParams.has('drain') && url.searchParams.get('drain') !== 'false';
    url.searchParams.delete('drain');
    const port = Number(url.port || (engine === 'mysql' ? 3306 : 5432));
    const host = url.hostname.replace(/^\[|\]$/g, '');
    hosts.push({
      key: `${engine}@${region}/${host}:${port}`,
      engine,
      region,
      host,
      port,
      drain,
      adminUrl: url.toString(),
    });
  });
  const seen = new Set<string>();
  for (const h of hosts) {
    if (seen.has(h.key)) problems.push(`${h.key} is listed twice`);
    seen.add(h.key);
  }
  if (!problems.length && !hosts.length) problems.push('lists no server');
  if (problems.length) throw new Error(problems.join('; '));
  return hosts;
}

/** `DATABASE_HOSTS`, else the contents of `DATABASE_HOSTS_FILE`; undefined when neither is set. */
export function databaseHostsText(hosts: string | undefined, file: string | undefined): string | undefined {
  if (hosts) return hosts;
  if (file) return readFileSync(file, 'utf8');
  return undefined;
}
