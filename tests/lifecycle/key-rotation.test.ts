// Test tier: server
import { hkdfSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { URI, type TOTP } from 'otpauth';
import { ConfigError } from '../../server/config.js';
import { openDatabase, type Database } from '../../server/db/orm.js';
import { atRestKeyRings, reencryptAtRest } from '../../server/kit/at-rest.js';
import { buildRegistry } from '../../server/kit/registry.js';
import {
  AtRestKeyError,
  decryptSecret,
  encryptSecret,
  isEncryptedSecret,
  keyRing,
} from '../../server/lib/crypto.js';
import { modules } from '../../server/modules.js';
import { createOrg, createUser, type TestUser } from '../support/factories.js';
import { FakeClock } from '../support/fake-clock.js';
import { testConfig } from '../support/env.js';
import { http } from '../support/http.js';
import { newSite } from '../modules/hosting/hosting-helpers.js';
import { ownPostgresDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { startTestServer, type TestServer } from '../support/server.js';

const key = () => randomBytes(32).toString('hex');

describe('at-rest ciphertexts and key rings', () => {
  const k1 = randomBytes(32);
  const k2 = randomBytes(32);

  it('writes the current key id, reads values of the previous key and values written before key ids', () => {
    const old = keyRing(k1);
    const rotated = keyRing(k2, [k1]);
    const underOld = encryptSecret(old, 'a secret');
    expect(underOld.startsWith(`v2.${old.current.id}.`)).to.equal(true);
    expect(decryptSecret(rotated, underOld)).to.equal('a secret');
    const underNew = encryptSecret(rotated, 'a secret');
    expect(underNew.startsWith(`v2.${rotated.current.id}.`)).to.equal(true);
    expect(rotated.current.id).to.not.equal(old.current.id);
    // A value of the old format: the same nonce, tag and ciphertext without the key id.
    const v1 = underOld.replace(/^v2\.[^.]+\./, 'v1.');
    expect(isEncryptedSecret(v1)).to.equal(true);
    expect(decryptSecret(rotated, v1)).to.equal('a secret');
  });

  it("derives each purpose's key with the HKDF info it always had, so stored values stay readable", () => {
    const rings = atRestKeyRings('a-secret-of-this-test');
    const derive = (info: string) => Buffer.from(hkdfSync('sha256', 'a-secret-of-this-test', '', info, 32));
    expect(rings.secrets.current.key.equals(derive('two-factor secrets'))).to.equal(true);
    expect(rings.idempotency.current.key.equals(derive('idempotency records'))).to.equal(true);
  });

  it('refuses clearly a value of a key that is not configured, or altered', () => {
    const underOld = encryptSecret(keyRing(k1), 'a secret');
    expect(() => decryptSecret(keyRing(k2), underOld)).to.throw(AtRestKeyError, /key that is not configured/);
    expect(() => decryptSecret(keyRing(k2), underOld.replace(/^v2\.[^.]+\./, 'v1.'))).to.throw(
      AtRestKeyError,
      /no configured key/,
    );
    const altered = underOld.slice(0, -2) + (underOld.endsWith('AA') ? 'BB' : 'AA');
    expect(() => decryptSecret(keyRing(k1), altered)).to.throw(AtRestKeyError, /altered/);
  });

  it('checks TWO_FACTOR_KEY_PREVIOUS without repeating it', () => {
    const current = key();
    for (const [previous, problem] of [
      ['too-short', /TWO_FACTOR_KEY_PREVIOUS must be at least 32 bytes/],
      [current, /TWO_FACTOR_KEY_PREVIOUS must differ from TWO_FACTOR_KEY/],
    ] as const) {
      let err: unknown;
      try {
        testConfig({ TWO_FACTOR_KEY: current, TWO_FACTOR_KEY_PREVIOUS: previous });
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(ConfigError);
      expect((err as Error).message).to.match(problem);
      expect((err as Error).message).to.not.include(previous);
    }
  });
});

/**
 * docs/security.md, "Rotating the at-rest key": TWO_FACTOR_KEY_PREVIOUS still opens what the old key encrypted, a
 * start re-encrypts every stored value under the current key (also after an interrupted pass), and a key that opens
 * nothing stops the start without touching a row.
 */
describe('rotating the at-rest key (TWO_FACTOR_KEY, TWO_FACTOR_KEY_PREVIOUS)', function () {
  this.timeout(180_000);
  const K1 = key();
  const K2 = key();
  const clock = new FakeClock('2026-11-27T09:00:00.000Z');
  let dir: string;
  let scratch: ScratchDatabase | undefined;
  let s: TestServer | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'key-rotation-'));
    scratch = await ownPostgresDatabase('key_rotation');
  });
  after(async () => {
    await s?.close();
    await scratch?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A server on this test's database (its own PGlite directory, or its own PostgreSQL database). */
  const start = (env: Record<string, string | undefined>) =>
    startTestServer({
      clock,
      pgliteDataDir: scratch ? undefined : join(dir, 'pglite'),
      env: {
        DATA_DIR: join(dir, 'data'),
        DATABASE_URL: scratch?.url,
        TWO_FACTOR_KEY_PREVIOUS: undefined,
        ...env,
      },
    });

  /** The database without a server (so without the start-up pass), for reading or altering rows. */
  async function withDatabase<T>(run: (db: Database) => Promise<T>): Promise<T> {
    const { entities, migrations } = buildRegistry(modules);
    const db = await openDatabase({
      databaseUrl: scratch?.url,
      pgliteDataDir: join(dir, 'pglite'),
      entities: [...entities],
      migrations: [...migrations],
    });
    try {
      return await run(db);
    } finally {
      await db.close();
    }
  }

  interface Stored {
    place: string;
    value: string;
  }
  /** Every value of every text or json column of the schema that looks like a ciphertext, wherever it is. */
  async function ciphertexts(db: Database): Promise<Stored[]> {
    const em = db.orm.em.fork();
    const columns = await em.execute<{ table_name: string; column_name: string }[]>(
      `select "table_name", "column_name" from information_schema.columns
        where table_schema = current_schema() and data_type in ('text', 'character varying', 'json', 'jsonb')
        order by 1, 2`,
    );
    const found: Stored[] = [];
    for (const c of columns) {
      const rows = await em.execute<{ value: string }[]>(
        `select "${c.column_name}"::text as "value" from "${c.table_name}"
          where left("${c.column_name}"::text, 3) in ('v1.', 'v2.') or left("${c.column_name}"::text, 4) in ('"v1.', '"v2.')
          order by 1`,
      );
      for (const r of rows) found.push({ place: `${c.table_name}.${c.column_name}`, value: r.value });
    }
    return found;
  }
  const unquote = (v: string) => (v.startsWith('"') ? (JSON.parse(v) as string) : v);

  let owner: TestUser;
  let authenticator: TOTP;
  let pendingUser: TestUser;
  let pendingAuthenticator: TOTP;
  let webhook: { id: string; secret: string };
  let previousSecret: string;
  let idempotent: { key: string; body: unknown; text: string };
  let siteId: string;
  const vars = { API_URL: 'https://api.example.com', DEPLOY_TOKEN: 'rotation-secret-value-42' };
  const codeAt = (a: TOTP) => a.generate({ timestamp: clock.now().getTime() });

  it('stores every kind of at-rest value under the first key', async () => {
    s = await start({ TWO_FACTOR_KEY: K1 });
    owner = await createOrg(s.deps);
    // Two-factor: a confirmed secret (owner) and a pending one (a member who ran setup only).
    const setup = await http(s.baseUrl, 'POST', '/v1/auth/2fa/setup', { token: owner.token, body: {} });
    authenticator = URI.parse(setup.body.otpauth_url) as TOTP;
    const enabled = await http(s.baseUrl, 'POST', '/v1/auth/2fa/enable', {
      token: owner.token,
      body: { password: owner.password, code: codeAt(authenticator) },
    });
    expect(enabled.status, enabled.text).to.equal(200);
    clock.advance(30_000);
    pendingUser = await createUser(s.deps, owner.organizationId);
    const pending = await http(s.baseUrl, 'POST', '/v1/auth/2fa/setup', {
      token: pendingUser.token,
      body: {},
    });
    pendingAuthenticator = URI.parse(pending.body.otpauth_url) as TOTP;
    // A webhook created with an Idempotency-Key (its kept answer shows the secret), then rotated.
    const token = (await login()).token;
    const idemKey = `rotation-${randomBytes(6).toString('hex')}`;
    const created = await http(s.baseUrl, 'POST', '/v1/webhooks', {
      token,
      headers: { 'idempotency-key': idemKey },
      body: { url: 'https://receiver.example.com/hook', events: ['user.created'] },
    });
    expect(created.status, created.text).to.equal(201);
    idempotent = { key: idemKey, body: created.body, text: created.text };
    previousSecret = created.body.webhook.secret;
    const rotated = await http(s.baseUrl, 'POST', `/v1/webhooks/${created.body.webhook.id}/rotate-secret`, {
      token,
      body: {},
    });
    expect(rotated.status, rotated.text).to.equal(200);
    webhook = { id: created.body.webhook.id, secret: rotated.body.secret };
    siteId = (await newSite(s.baseUrl, token, { environment_variables: vars })).id;
    await s.close();
    s = undefined;

    // One value as written before key ids (`v1`): the environment of the site.
    await withDatabase(async (db) => {
      await db.orm.em
        .fork()
        .execute(
          `update "hosting_sites" set "environment_variables" = regexp_replace("environment_variables"::text, '^"v2\\.[^.]+\\.', '"v1.')::json where "id" = ?`,
          [siteId],
        );
      const stored = await ciphertexts(db);
      expect(stored.map((c) => c.place)).to.include.members([
        'two_factor_credentials.secret',
        'two_factor_credentials.pending_secret',
        'webhooks.secret',
        'webhooks.previous_secret',
        'hosting_sites.environment_variables',
        'idempotency_records.body',
      ]);
      const k1 = atRestKeyRings(K1);
      for (const c of stored) {
        const ring = c.place === 'idempotency_records.body' ? k1.idempotency : k1.secrets;
        expect(() => decryptSecret(ring, unquote(c.value)), c.place).to.not.throw();
      }
    });
  });

  /** Password step of the owner's sign-in; the code step when two-factor is on. */
  async function login(): Promise<{ token: string }> {
    const res = await http(s!.baseUrl, 'POST', '/v1/auth/login', {
      body: { email: owner.email, password: owner.password },
    });
    expect(res.status, res.text).to.equal(200);
    if (!res.body.two_factor_required) return { token: res.body.token };
    clock.advance(30_000);
    const verified = await http(s!.baseUrl, 'POST', '/v1/auth/2fa/verify', {
      body: { challenge_token: res.body.challenge_token, code: codeAt(authenticator) },
    });
    expect(verified.status, verified.text).to.equal(200);
    return { token: verified.body.token };
  }

  it('refuses to start with a key that opens nothing (wrong or missing), and changes no row', async () => {
    const before = await withDatabase(ciphertexts);
    for (const env of [
      { TWO_FACTOR_KEY: key() },
      // Unset outside production: a key generated into a fresh DATA_DIR, which opens nothing stored either.
      { TWO_FACTOR_KEY: undefined, DATA_DIR: join(dir, 'another-data-dir') },
      // A rotation whose previous key is not the one the data was written with.
      { TWO_FACTOR_KEY: K2, TWO_FACTOR_KEY_PREVIOUS: key() },
    ]) {
      let err: unknown;
      try {
        s = await start(env);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(Object.keys(env))).to.be.instanceOf(AtRestKeyError);
      expect((err as Error).message).to.match(/TWO_FACTOR_KEY_PREVIOUS/);
      expect((err as Error).message)
        .to.not.include(K1)
        .and.not.include(K2);
      s = undefined;
    }
    expect(await withDatabase(ciphertexts)).to.deep.equal(before);
  });

  it('re-encrypts everything under the new key at start, carrying on after an interrupted pass', async () => {
    const k1 = atRestKeyRings(K1);
    const k2 = atRestKeyRings(K2, K1);
    // A pass interrupted after one row: the webhook's current secret is already under the new key.
    await withDatabase(async (db) => {
      const em = db.orm.em.fork();
      const [row] = await em.execute<{ secret: string }[]>('select "secret" from "webhooks" where "id" = ?', [
        webhook.id,
      ]);
      await em.execute('update "webhooks" set "secret" = ? where "id" = ?', [
        encryptSecret(k2.secrets, decryptSecret(k1.secrets, row!.secret)),
        webhook.id,
      ]);
    });

    s = await start({ TWO_FACTOR_KEY: K2, TWO_FACTOR_KEY_PREVIOUS: K1 });
    const stored = await ciphertexts(s.deps.db);
    expect(stored).to.have.length.of.at.least(6);
    for (const c of stored) {
      const ring = c.place === 'idempotency_records.body' ? k2.idempotency : k2.secrets;
      expect(unquote(c.value).startsWith(`v2.${ring.current.id}.`), `${c.place} under the new key`).to.equal(
        true,
      );
    }
    // A second pass finds nothing to do.
    expect(
      await reencryptAtRest(
        s.deps,
        modules.flatMap((m) => m.atRest ?? []),
      ),
    ).to.deep.equal({});
    await s.close();
    s = undefined;
  });

  it('reads every value with the new key alone once the previous one is removed', async () => {
    s = await start({ TWO_FACTOR_KEY: K2 });
    const { token } = await login();
    const [hook] = await s.deps.db.orm.em
      .fork()
      .execute<{ secret: string; previous_secret: string }[]>(
        'select "secret", "previous_secret" from "webhooks" where "id" = ?',
        [webhook.id],
      );
    expect(decryptSecret(s.deps.keys.secrets, hook!.secret)).to.equal(webhook.secret);
    expect(decryptSecret(s.deps.keys.secrets, hook!.previous_secret)).to.equal(previousSecret);
    const site = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${siteId}`, { token });
    expect(site.body.site.environment_variables).to.deep.equal(vars);
    // The kept idempotent answer replays byte for byte.
    const replay = await http(s.baseUrl, 'POST', '/v1/webhooks', {
      token,
      headers: { 'idempotency-key': idempotent.key },
      body: { url: 'https://receiver.example.com/hook', events: ['user.created'] },
    });
    expect(replay.status, replay.text).to.equal(201);
    expect(replay.text).to.equal(idempotent.text);
    // The pending two-factor secret still confirms.
    clock.advance(30_000);
    const enabled = await http(s.baseUrl, 'POST', '/v1/auth/2fa/enable', {
      token: pendingUser.token,
      body: { password: pendingUser.password, code: codeAt(pendingAuthenticator) },
    });
    expect(enabled.status, enabled.text).to.equal(200);
  });
});
