// Test tier: unit
import { expect } from 'chai';
import type { Actor } from '../../../server/access/actor.js';
import type { Permission } from '../../../server/access/permissions.js';
import type { ActorContext, AppDeps } from '../../../server/kit/deps.js';
import { sha256Hex } from '../../../server/lib/crypto.js';
import { MAX_KEYS_PER_ORGANIZATION } from '../../../server/modules/api-keys/api-keys.constants.js';
import * as apiKeys from '../../../server/modules/api-keys/api-keys.service.js';
import { InMemoryApiKeysRepository } from './in-memory-api-keys.repository.js';
import { NO_EM } from '../../support/in-memory.js';
import { appRejection, unitActor } from '../../support/unit.js';

/** The api-keys service against an in-memory repository (./in-memory-api-keys.repository.ts): no server, no database. */

function harness() {
  const repo = new InMemoryApiKeysRepository();
  const clock = { t: Date.parse('2026-11-01T00:00:00.000Z') };
  const deps = {
    clock: { now: () => new Date(clock.t) },
    modules: { apiKeys: { repository: repo } },
  } as unknown as AppDeps;
  const ctx = (actor: Actor): ActorContext => ({
    em: NO_EM,
    deps,
    actor,
    requestId: 'req',
    ip: '127.0.0.1',
    userAgent: undefined,
  });
  return { repo, clock, ctx };
}

const actor = (permissions: Permission[], organizationId?: string): Actor =>
  unitActor({ role: 'admin', permissions, organizationId });

const page = { limit: 20 } as const;

describe('api-keys service (in-memory repository)', () => {
  it('creates a key acting as the caller: the secret once, its hash and prefix stored, the organization locked', async () => {
    const h = harness();
    const owner = actor(['vpn:read', 'vpn:write']);
    const out = await apiKeys.createApiKey(h.ctx(owner), {
      name: 'ci',
      permissions: ['vpn:read'],
      expires_in_days: 10,
    });
    expect(out.secret).to.match(/^sk_[A-Za-z0-9_-]{43}$/);
    expect(out.api_key).to.include({ name: 'ci', prefix: out.secret.slice(0, 12), created_by: owner.userId });
    expect(out.api_key.permissions).to.deep.equal(['vpn:read']);
    expect(out.api_key.expires_at).to.equal('2026-11-11T00:00:00.000Z');
    expect(h.repo.keys[0]!.secretHash).to.equal(sha256Hex(out.secret));
    expect(h.repo.locked).to.deep.equal([owner.organizationId]);
  });

  it('refuses permissions the caller does not hold (403), and a key beyond the organization limit (409)', async () => {
    const h = harness();
    const member = actor(['vpn:read']);
    const denied = await appRejection(
      apiKeys.createApiKey(h.ctx(member), { name: 'x', permissions: ['vpn:read', 'database:write'] }),
    );
    expect(denied.code).to.equal('FORBIDDEN');
    expect(denied.message).to.contain('database:write');
    expect(h.repo.keys).to.have.length(0);

    for (let i = 0; i < MAX_KEYS_PER_ORGANIZATION; i++) {
      await apiKeys.createApiKey(h.ctx(member), { name: `k${i}`, permissions: ['vpn:read'] });
    }
    const full = await appRejection(
      apiKeys.createApiKey(h.ctx(member), { name: 'one more', permissions: [] }),
    );
    expect(full.code).to.equal('CONFLICT');
    expect(h.repo.keys).to.have.length(MAX_KEYS_PER_ORGANIZATION);
  });

  it("lists the organization's live keys newest first; another organization's key and a revoked one are 404", async () => {
    const h = harness();
    const a = actor(['vpn:read']);
    const b = actor(['vpn:read']);
    const first = await apiKeys.createApiKey(h.ctx(a), { name: 'first', permissions: [] });
    h.clock.t += 1000;
    const second = await apiKeys.createApiKey(h.ctx(a), { name: 'second', permissions: [] });
    const other = await apiKeys.createApiKey(h.ctx(b), { name: 'other', permissions: [] });

    const listed = await apiKeys.listApiKeys(h.ctx(a), page);
    expect(listed.api_keys.map((k) => k.name)).to.deep.equal(['second', 'first']);
    expect(listed).to.include({ total: 2, page: 1, has_more: false });

    expect((await appRejection(apiKeys.getApiKey(h.ctx(a), other.api_key.id))).code).to.equal('NOT_FOUND');
    expect((await apiKeys.getApiKey(h.ctx(a), first.api_key.id)).api_key.name).to.equal('first');

    expect(await apiKeys.revokeApiKey(h.ctx(a), second.api_key.id)).to.deep.equal({
      success: true,
      message: 'API key revoked',
      id: second.api_key.id,
    });
    expect((await appRejection(apiKeys.getApiKey(h.ctx(a), second.api_key.id))).code).to.equal('NOT_FOUND');
    expect((await appRejection(apiKeys.revokeApiKey(h.ctx(a), second.api_key.id))).code).to.equal(
      'NOT_FOUND',
    );
    expect((await apiKeys.listApiKeys(h.ctx(a), page)).api_keys.map((k) => k.name)).to.deep.equal(['first']);
  });
});
