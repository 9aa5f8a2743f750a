// Test tier: server
import { expect } from 'chai';
import { toAppError } from '../../../server/trpc/init.js';
import { createOrg, createUser } from '../../support/factories.js';
import { rejection } from '../../support/rejection.js';
import { sharedServer, type TestServer } from '../../support/server.js';
import { waitFor } from '../../support/wait.js';
import { dbName } from './databases-helpers.js';

/** The same procedures in process (createCaller with a real context): typed results, the same error codes. */
describe('Databases in process', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  const outcome = async (p: Promise<unknown>) => {
    const err = toAppError(await rejection(p));
    return { status: err.status, code: err.code };
  };

  it('runs the whole life of a database', async () => {
    const owner = await createOrg(s.deps);
    const api = s.caller(owner.token).databases;
    const { database } = await api.create({ name: dbName('inproc'), engine: 'mongodb', region: 'sa-east' });
    expect(database).to.include({ status: 'creating', version: '7.0', region: 'sa-east' });
    expect(database.connection_info.password).to.be.a('string');
    await waitFor('the database to be running', async () =>
      (await api.get({ id: database.id })).database.status === 'running' ? true : undefined,
    );

    const resized = await api.update({ id: database.id, size: 'medium', backup_retention: 20 });
    expect(resized.database).to.include({ status: 'resizing', size: 'medium', backup_retention: 20 });
    expect(await outcome(api.update({ id: database.id, size: 'large' }))).to.deep.equal({
      status: 409,
      code: 'CONFLICT',
    });
    await waitFor('the resized database to be running', async () =>
      (await api.get({ id: database.id })).database.status === 'running' ? true : undefined,
    );

    const { backup } = await api.backups.create({ id: database.id, description: 'by hand' });
    expect(backup).to.include({
      type: 'manual',
      status: 'pending',
      description: 'by hand',
      engine: 'mongodb',
    });
    const listed = await api.backups.list({ id: database.id, type: 'manual' });
    expect(listed).to.include({ total: 1, page: 1, limit: 20 });

    const reset = await api.resetPassword({ id: database.id });
    expect(reset.password).to.equal(reset.database.connection_info.password);

    const deletion = await api.delete({ id: database.id });
    expect(deletion.final_backup).to.match(/^backup_/);
    expect(await outcome(api.delete({ id: database.id }))).to.deep.equal({ status: 409, code: 'CONFLICT' });
    const kept = await api.cancelDeletion({ id: database.id });
    expect(kept.database.status).to.equal('running');
    const list = await api.list({ engine: 'mongodb' });
    expect(list.databases.map((d) => d.id)).to.deep.equal([database.id]);
  });

  it('answers with the same codes as over HTTP', async () => {
    const owner = await createOrg(s.deps);
    const api = s.caller(owner.token).databases;
    expect(await outcome(api.create({ name: 'Bad Name', engine: 'postgresql' }))).to.deep.equal({
      status: 400,
      code: 'VALIDATION_ERROR',
    });
    expect(await outcome(api.create({ name: dbName(), engine: 'postgresql', version: '7.0' }))).to.deep.equal(
      { status: 400, code: 'VALIDATION_ERROR' },
    );
    expect(await outcome(api.get({ id: 'db_nothinghere' }))).to.deep.equal({
      status: 404,
      code: 'NOT_FOUND',
    });
    await api.create({ name: dbName(), engine: 'postgresql' });
    await api.create({ name: dbName(), engine: 'postgresql' });
    const full = toAppError(await rejection(api.create({ name: dbName(), engine: 'postgresql' })));
    expect(full.code).to.equal('PLAN_LIMIT_EXCEEDED');
    expect(full.details).to.deep.equal([{ resource: 'databases', limit: 2, current: 2 }]);
    const reader = await createUser(s.deps, owner.organizationId);
    expect(
      await outcome(s.caller(reader.token).databases.create({ name: dbName(), engine: 'mysql' })),
    ).to.deep.equal({
      status: 403,
      code: 'FORBIDDEN',
    });
    expect(await outcome(s.caller().databases.list())).to.deep.equal({ status: 401, code: 'UNAUTHORIZED' });
  });
});
