// Test tier: server
import { Writable } from 'node:stream';
import { expect } from 'chai';
import pino from 'pino';
import { buildApp } from '../../../server/app.js';
import { Event } from '../../../server/events/event.entity.js';
import type { AppDeps } from '../../../server/kit/deps.js';
import { sha256Hex } from '../../../server/lib/crypto.js';
import { startServices, stopServices } from '../../../server/services.js';
import { contractObserver } from '../../support/contract.js';
import { testConfig } from '../../support/env.js';
import { createOrg } from '../../support/factories.js';
import { http, type HttpResult } from '../../support/http.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';
import { createWebhook } from '../webhooks/webhook-helpers.js';
import { waitBackupCompleted, waitStatus } from './databases-helpers.js';

/**
 * The generated password leaves the server in the create (or reset-password) response only: every later response,
 * every event payload (the outbox, hence every webhook body) and the server's log, at its most verbose, are
 * searched for the password and for its stored hash.
 */
describe('Databases: the password is shown once', function () {
  this.timeout(60_000);
  let deps: AppDeps;
  let app: Awaited<ReturnType<typeof buildApp>>;
  let baseUrl: string;
  let rx: Receiver;
  const logLines: string[] = [];

  before(async () => {
    const config = testConfig({ LOG_LEVEL: 'trace' });
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logLines.push(chunk.toString('utf8'));
        done();
      },
    });
    deps = await startServices(config, {
      pgliteDataDir: config.databaseUrl ? undefined : 'memory://',
      log: pino({ level: 'trace' }, sink),
    });
    app = await buildApp(deps, { observeResponse: contractObserver });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    baseUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    rx = await startReceiver();
  });
  after(async () => {
    await rx?.close();
    await app?.close();
    if (deps) await stopServices(deps);
  });

  it('never shows the password or its hash again: responses, events, webhook bodies, log', async () => {
    const owner = await createOrg(deps, { plan: 'pro' });
    const s = { deps, baseUrl } as Parameters<typeof createWebhook>[0];
    await createWebhook(s, owner, rx.url, [
      'database.created',
      'database.updated',
      'database.deleted',
      'database.backup.completed',
    ]);
    const later: HttpResult[] = [];
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await http(baseUrl, method, `/v1${path}`, { token: owner.token, body });
      later.push(res);
      return res;
    };

    const created = await http(baseUrl, 'POST', '/v1/databases', {
      token: owner.token,
      body: { name: 'secrets', engine: 'mysql', backup_enabled: true },
    });
    expect(created.status).to.equal(201);
    const id = created.body.database.id as string;
    const first = created.body.database.connection_info.password as string;
    expect(created.text).to.include(first);

    await waitStatus(baseUrl, owner.token, id, 'running');
    await call('GET', `/databases/${id}`);
    await call('GET', '/databases');
    await call('GET', `/databases?engine=mysql`);
    await call('PUT', `/databases/${id}`, { backup_retention: 12 });
    const b = await call('POST', `/databases/${id}/backups`, { name: 'nightly' });
    await waitBackupCompleted(baseUrl, owner.token, id, b.body.backup.id);
    await call('GET', `/databases/${id}/backups`);

    const reset = await http(baseUrl, 'POST', `/v1/databases/${id}/reset-password`, {
      token: owner.token,
      body: {},
    });
    expect(reset.status).to.equal(200);
    const second = reset.body.password as string;
    expect(second).to.not.equal(first);
    expect(reset.text).not.to.include(first);

    await call('GET', `/databases/${id}`);
    const deletion = await call('DELETE', `/databases/${id}`);
    await waitBackupCompleted(baseUrl, owner.token, id, deletion.body.final_backup);
    await call('POST', `/databases/${id}/cancel-deletion`, {});
    await call('GET', `/databases/${id}`);
    const restored = await http(baseUrl, 'POST', '/v1/databases', {
      token: owner.token,
      body: { name: 'secrets-copy', engine: 'mysql', backup_id: deletion.body.final_backup },
    });
    expect(restored.status).to.equal(201);
    expect(restored.text).not.to.include(first);
    expect(restored.text).not.to.include(second);

    // Every event of the flow was relayed to the receiver.
    const expected = [
      'database.created',
      'database.updated',
      'database.backup.completed',
      'database.deleted',
    ];
    const received = await rx.waitFor(
      (r) => expected.every((t) => r.some((q) => q.body?.type === t)) && r.length >= 8,
    );

    const secrets = [first, second, sha256Hex(first), sha256Hex(second)];
    for (const res of later) {
      expect(res.status, res.text).to.be.below(300);
      for (const secret of secrets)
        expect(res.text, `${res.status} ${res.text.slice(0, 80)}`).not.to.include(secret);
      expect(res.text).not.to.match(/"password"/);
    }
    const events = await deps.db.orm.em.fork().find(Event, { organizationId: owner.organizationId });
    expect(events.filter((e) => e.type.startsWith('database.')).length).to.be.at.least(6);
    const eventText = JSON.stringify(events.map((e) => e.data));
    for (const secret of secrets) expect(eventText).not.to.include(secret);
    expect(eventText).to.include(':****@');
    for (const q of received) for (const secret of secrets) expect(q.raw.toString()).not.to.include(secret);

    const log = logLines.join('');
    expect(log, 'the log was captured').to.include(id);
    for (const secret of secrets) expect(log).not.to.include(secret);

    const rows = await deps.db.orm.em
      .fork()
      .execute(`select * from databases where organization_id = ?`, [owner.organizationId]);
    const stored = JSON.stringify(rows);
    expect(stored).not.to.include(first);
    expect(stored).not.to.include(second);
    expect(stored).to.include(sha256Hex(second));
  });
});
