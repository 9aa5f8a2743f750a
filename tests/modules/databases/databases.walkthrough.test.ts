// Test tier: server
import { expect } from 'chai';
import { http } from '../../support/http.js';
import { startTestServer, type TestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';

/**
 * What a new user does, over HTTP only, as the README describes it: sign up, create a database, copy the one-time
 * connection string, see it running, resize it, back it up, list the backups, delete it, cancel the deletion,
 * delete it again, and once it is gone, restore a new database (with the same name) from its final backup.
 */
describe('Databases: the walk-through of a new user', function () {
  this.timeout(60_000);
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ env: { DATABASE_DELETION_GRACE: '4s' } });
  });
  after(async () => {
    await s?.close();
  });

  it('creates, resizes, backs up, deletes, cancels, deletes again and restores from the final backup', async () => {
    const call = (method: string, path: string, body?: unknown) =>
      http(s.baseUrl, method, `/v1${path}`, { token, body });
    const waitDatabase = (id: string, check: (d: any) => boolean) =>
      waitFor(`database ${id} to reach the state checked`, async () => {
        const res = await call('GET', `/databases/${id}`);
        return res.status === 200 && check(res.body.database) ? res.body.database : undefined;
      });

    // 1. Sign up: an organization on the starter plan.
    const signup = await http(s.baseUrl, 'POST', '/v1/auth/register', {
      body: {
        email: `walker-${Date.now()}@example.test`,
        password: 'correct-horse-battery',
        name: 'Walker',
        organization_name: 'Walkers',
      },
    });
    expect(signup.status, signup.text).to.equal(201);
    const token: string = signup.body.token;

    // 2. Create a database and keep the connection string: the only time it carries the password.
    const created = await call('POST', '/databases', {
      name: 'shop',
      engine: 'postgresql',
      region: 'eu-west',
    });
    expect(created.status, created.text).to.equal(201);
    const db = created.body.database;
    expect(created.headers.get('location')).to.match(new RegExp(`/v1/databases/${db.id}$`));
    const connectionString: string = db.connection_string;
    const password: string = db.connection_info.password;
    const url = new URL(connectionString);
    expect(url.protocol).to.equal('postgresql:');
    expect(decodeURIComponent(url.password)).to.equal(password);
    expect(url.hostname).to.match(/^shop-[a-z0-9]+\.eu-west\.db\.example\.com$/);
    expect(url.port).to.equal('5432');
    expect(db.status).to.equal('creating');

    // 3. It runs after a moment; from now on the password is masked.
    const running = await waitDatabase(db.id, (d) => d.status === 'running');
    expect(running.connection_string).to.equal(connectionString.replace(password, '****'));
    expect(running.connection_info).not.to.have.property('password');
    expect(running.metrics.connections.max).to.equal(50);

    // 4. Resize: resizing, then running on the bigger size.
    const resized = await call('PUT', `/databases/${db.id}`, { size: 'medium' });
    expect(resized.status, resized.text).to.equal(200);
    expect(resized.body.database.status).to.equal('resizing');
    const bigger = await waitDatabase(db.id, (d) => d.status === 'running');
    expect(bigger).to.include({ size: 'medium', storage: '100 GB' });

    // 5. A manual backup, and the list of backups.
    const backup = await call('POST', `/databases/${db.id}/backups`, {
      name: 'before-launch',
      description: 'Clean catalogue',
    });
    expect(backup.status, backup.text).to.equal(202);
    expect(backup.body.backup.status).to.equal('pending');
    const listed = await waitFor('the backup to complete', async () => {
      const res = await call('GET', `/databases/${db.id}/backups`);
      return res.body.backups?.[0]?.status === 'completed' ? res.body : undefined;
    });
    expect(listed).to.include({ success: true, total: 1, page: 1, limit: 20 });
    expect(listed.backups[0]).to.include({
      id: backup.body.backup.id,
      type: 'manual',
      name: 'before-launch',
    });

    // 6. Delete: a final backup and a removal date; then change our mind.
    const deletion = await call('DELETE', `/databases/${db.id}`);
    expect(deletion.status, deletion.text).to.equal(202);
    expect(deletion.body).to.include({ success: true, id: db.id });
    expect((await call('GET', `/databases/${db.id}`)).body.database.status).to.equal('deleting');
    const canceled = await call('POST', `/databases/${db.id}/cancel-deletion`, {});
    expect(canceled.status, canceled.text).to.equal(200);
    expect(canceled.body.database).to.include({ status: 'running', deletion_scheduled: null });

    // 7. Delete again, for good this time; the final backup completes, then the database is gone.
    const again = await call('DELETE', `/databases/${db.id}`);
    expect(again.status, again.text).to.equal(202);
    const finalBackup: string = again.body.final_backup;
    expect(finalBackup).to.not.equal(deletion.body.final_backup);
    await waitFor('the database to be gone', async () =>
      (await call('GET', `/databases/${db.id}`)).status === 404 ? true : undefined,
    );
    expect((await call('GET', `/databases/${db.id}/backups`)).status).to.equal(404);
    expect((await call('GET', '/databases')).body.total).to.equal(0);

    // 8. Restore a new database, with the same name, from the final backup.
    const restored = await call('POST', '/databases', {
      name: 'shop',
      engine: 'postgresql',
      backup_id: finalBackup,
    });
    expect(restored.status, restored.text).to.equal(201);
    expect(restored.body.database).to.include({
      name: 'shop',
      size: 'medium',
      region: 'eu-west',
      version: '16',
      restored_from_backup_id: finalBackup,
    });
    expect(restored.body.database.id).to.not.equal(db.id);
    expect(restored.body.database.connection_info.password).to.not.equal(password);
    const back = await waitDatabase(restored.body.database.id, (d) => d.status === 'running');
    expect(back.connection_info.host).to.not.equal(url.hostname);
    // The restored database has its own backups (none yet); the final backup stays until it expires.
    expect((await call('GET', `/databases/${back.id}/backups`)).body.total).to.equal(0);
  });
});
