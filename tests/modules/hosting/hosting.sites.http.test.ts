// Test tier: server
import { expect } from 'chai';
import { HostingSite } from '../../../server/modules/hosting/hosting-site.entity.js';
import { appRouter } from '../../../server/router.js';
import { createInProcessContext } from '../../../server/trpc/context.js';
import { createCallerFactory, toAppError } from '../../../server/trpc/init.js';
import { createOrg, createUser, type TestUser } from '../../support/factories.js';
import { http } from '../../support/http.js';
import { sharedServer, startTestServer, type TestServer } from '../../support/server.js';
import {
  countSites,
  createSite,
  GIT_REPO,
  newDeployment,
  newSite,
  waitForDeployment,
} from './hosting-helpers.js';

const SITE_KEYS = [
  'id',
  'name',
  'domain',
  'domain_verification',
  'status',
  'ssl_enabled',
  'region',
  'framework',
  'url',
  'preview_url',
  'git_repo',
  'branch',
  'user_id',
  'live_deployment_id',
  'last_deployment',
  'created_at',
  'updated_at',
];
const DETAIL_KEYS = [...SITE_KEYS, 'build_settings', 'environment_variables', 'metrics'];
/** Marks a site's domain verified, as a found TXT record would (docs/sites.md, "Custom domains"). */
async function markVerified(s: TestServer, siteId: string): Promise<void> {
  await s.deps.db.orm.em.fork().nativeUpdate(HostingSite, { id: siteId }, { domainVerifiedAt: new Date() });
}

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe('Hosting sites over HTTP', () => {
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  describe('POST /v1/hosting/sites', () => {
    it('creates a site: 201, Location, the detail view with framework defaults, null for what is absent', async () => {
      const owner = await createOrg(s.deps);
      const res = await createSite(s.baseUrl, owner.token, { name: 'Marketing Site' });
      expect(res.status, res.text).to.equal(201);
      const site = res.body.site;
      expect(res.body.success).to.equal(true);
      expect(site.id).to.match(/^site_[a-z0-9]{20}$/);
      expect(res.headers.get('location')).to.equal(
        `${s.deps.config.publicBaseUrl}/v1/hosting/sites/${site.id}`,
      );
      expect(res.headers.get('x-request-id')).to.match(/^req_/);
      expect(Object.keys(site).sort()).to.deep.equal([...DETAIL_KEYS].sort());
      expect(site).to.deep.include({
        name: 'Marketing Site',
        domain: null,
        status: 'active',
        ssl_enabled: true,
        region: 'global',
        framework: 'react',
        url: 'https://marketing-site.sites.example.com',
        preview_url: null,
        git_repo: GIT_REPO,
        branch: 'main',
        user_id: owner.id,
        live_deployment_id: null,
        last_deployment: null,
        build_settings: { build_command: 'npm run build', output_directory: 'build', node_version: '22' },
        environment_variables: {},
        metrics: { requests_24h: 0, bandwidth_24h: '0 B', uptime: '0%' },
      });
      expect(site.created_at).to.match(ISO_MS);
      expect(site.updated_at).to.match(ISO_MS);
    });

    for (const [framework, build_command, output_directory] of [
      ['react', 'npm run build', 'build'],
      ['nextjs', 'npm run build && npm run export', 'out'],
      ['vue', 'npm run build', 'dist'],
      ['angular', 'ng build --prod', 'dist'],
    ] as const) {
      it(`defaults the build of a ${framework} site to \`${build_command}\` into ${output_directory}/`, async () => {
        const owner = await createOrg(s.deps);
        const site = await newSite(s.baseUrl, owner.token, { framework });
        expect(site.framework).to.equal(framework);
        expect(site.build_settings).to.deep.equal({ build_command, output_directory, node_version: '22' });
      });
    }

    it('takes every optional field as given', async () => {
      const owner = await createOrg(s.deps);
      const env = { API_URL: 'https://api.example.com', _PRIVATE_FLAG: '1', FEATURE_X: '' };
      const site = await newSite(s.baseUrl, owner.token, {
        name: 'Docs',
        domain: 'docs.acme-example.com',
        branch: 'release/v2',
        framework: 'vue',
        build_command: 'yarn build:prod',
        output_directory: 'public/site',
        node_version: '18',
        environment_variables: env,
      });
      expect(site).to.deep.include({
        domain: 'docs.acme-example.com',
        branch: 'release/v2',
        build_settings: {
          build_command: 'yarn build:prod',
          output_directory: 'public/site',
          node_version: '18',
        },
        environment_variables: env,
      });
      // Key order is kept.
      expect(Object.keys(site.environment_variables)).to.deep.equal(Object.keys(env));
    });

    it('makes the address from the name, unique across organizations', async () => {
      const a = await createOrg(s.deps);
      const b = await createOrg(s.deps);
      const name = `Café Über ${Date.now()}`;
      const base = `cafe-uber-${name.split(' ').at(-1)}`;
      const first = await newSite(s.baseUrl, a.token, { name });
      const second = await newSite(s.baseUrl, b.token, { name });
      const third = await newSite(s.baseUrl, a.token, { name });
      expect(first.url).to.equal(`https://${base}.sites.example.com`);
      expect(second.url).to.equal(`https://${base}-2.sites.example.com`);
      expect(third.url).to.equal(`https://${base}-3.sites.example.com`);
      const odd = await newSite(s.baseUrl, a.token, { name: '!!!' });
      expect(odd.url).to.match(/^https:\/\/site(-\d+)?\.sites\.example\.com$/);
      const long = await newSite(s.baseUrl, a.token, { name: 'x'.repeat(100) });
      expect(new URL(long.url).hostname.split('.')[0]!.length).to.be.at.most(40);
    });

    describe('refuses bad input with 400 and creates nothing', () => {
      const cases: Array<[string, Record<string, unknown>, string]> = [
        ['no name', { name: undefined }, 'name'],
        ['an empty name', { name: '  ' }, 'name'],
        ['a name of 101 characters', { name: 'x'.repeat(101) }, 'name'],
        ['no git_repo', { git_repo: undefined }, 'git_repo'],
        ['no framework', { framework: undefined }, 'framework'],
        ['an unknown framework', { framework: 'svelte' }, 'framework'],
        ['an http:// repository', { git_repo: 'http://github.com/acme/web' }, 'git_repo'],
        [
          'a repository URL with credentials',
          { git_repo: 'https://me:secret@github.com/acme/web' },
          'git_repo',
        ],
        ['a repository that is not a URL', { git_repo: 'github.com/acme/web' }, 'git_repo'],
        ['a cloud metadata repository', { git_repo: 'https://169.254.169.254/latest' }, 'git_repo'],
        ['a link-local repository', { git_repo: 'https://169.254.10.10/repo.git' }, 'git_repo'],
        ['a metadata host name', { git_repo: 'https://metadata.google.internal/repo' }, 'git_repo'],
        ['an upper-case domain', { domain: 'Docs.Example.com' }, 'domain'],
        ['a one-label domain', { domain: 'localhost' }, 'domain'],
        ['a domain with a trailing dot', { domain: 'example.com.' }, 'domain'],
        ['an IP address as domain', { domain: '10.0.0.1' }, 'domain'],
        ['a domain with a bad label', { domain: 'bad_label.example.com' }, 'domain'],
        [
          'a domain over 253 characters',
          { domain: `${'a'.repeat(60)}.`.repeat(4) + 'example.com' },
          'domain',
        ],
        ['a domain under the platform domain', { domain: 'shop.sites.example.com' }, 'domain'],
        ['a bad branch', { branch: 'feature..x' }, 'branch'],
        ['a branch with a space', { branch: 'my branch' }, 'branch'],
        ['an empty build command', { build_command: '' }, 'build_command'],
        ['an absolute output directory', { output_directory: '/etc' }, 'output_directory'],
        ['an output directory outside the repository', { output_directory: '../up' }, 'output_directory'],
        ['node 16', { node_version: '16' }, 'node_version'],
        ['node 22 as a number', { node_version: 22 }, 'node_version'],
        [
          'a lower-case variable name',
          { environment_variables: { api_url: 'x' } },
          'environment_variables.api_url',
        ],
        [
          'a name starting with a digit',
          { environment_variables: { '1X': 'x' } },
          'environment_variables.1X',
        ],
        [
          'a name of 129 characters',
          { environment_variables: { ['A'.repeat(129)]: 'x' } },
          'environment_variables.',
        ],
        [
          'a value that is not a string',
          { environment_variables: { PORT: 8080 } },
          'environment_variables.PORT',
        ],
        [
          'a value over 4 KiB',
          { environment_variables: { BIG: 'x'.repeat(4097) } },
          'environment_variables.BIG',
        ],
        [
          '101 variables',
          {
            environment_variables: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`V${i}`, '1'])),
          },
          'environment_variables',
        ],
        [
          'over 64 KiB in all',
          {
            environment_variables: Object.fromEntries(
              Array.from({ length: 17 }, (_, i) => [`V${i}`, 'x'.repeat(4000)]),
            ),
          },
          'environment_variables',
        ],
        ['an unknown field', { colour: 'blue' }, 'colour'],
        ['a status', { status: 'active' }, 'status'],
      ];
      for (const [what, patch, path] of cases) {
        it(what, async () => {
          const owner = await createOrg(s.deps, { plan: 'pro' });
          const body: Record<string, unknown> = {
            name: 'Web',
            git_repo: GIT_REPO,
            framework: 'react',
            ...patch,
          };
          for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
          const res = await http(s.baseUrl, 'POST', '/v1/hosting/sites', { token: owner.token, body });
          expect(res.status, res.text).to.equal(400);
          expect(res.body.success).to.equal(false);
          expect(res.body.error.code).to.equal('VALIDATION_ERROR');
          expect(res.body.error.request_id).to.equal(res.headers.get('x-request-id'));
          const paths = (res.body.error.details as { path: string }[]).map((d) => d.path);
          expect(
            paths.some((p) => p.startsWith(path)),
            `${JSON.stringify(paths)} names ${path}`,
          ).to.equal(true);
          expect(await countSites(s.deps, owner.organizationId)).to.equal(0);
        });
      }

      it('a variable name of exactly 128 characters, values of exactly 4 KiB and 100 names are fine', async () => {
        const owner = await createOrg(s.deps);
        const env = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`V${i}`, 'v']));
        delete env.V0;
        delete env.V1;
        env['A'.repeat(128)] = 'x';
        env.BIG = 'é'.repeat(2048);
        const site = await newSite(s.baseUrl, owner.token, { environment_variables: env });
        expect(Object.keys(site.environment_variables)).to.have.length(100);
      });
    });

    describe('git_repo address rules', () => {
      /** A caller whose server refuses private targets (the test server allows them, for its receivers). */
      function strictCaller(token: string) {
        const deps = {
          ...s.deps,
          config: { ...s.deps.config, webhook: { ...s.deps.config.webhook, allowPrivateTargets: false } },
        };
        return createCallerFactory(appRouter)(createInProcessContext(deps, { token }));
      }

      const PRIVATE = [
        'https://127.0.0.1/repo.git',
        'https://localhost/repo.git',
        'https://10.1.2.3/repo.git',
        'https://192.168.1.10/repo.git',
        'https://[::1]/repo.git',
        'https://[::ffff:127.0.0.1]/repo.git',
        'https://2130706433/repo.git',
        'https://0x7f.1/repo.git',
        'https://100.64.0.1/repo.git',
      ];

      it('refuses loopback, private and CGNAT hosts in every spelling (400 git_repo)', async () => {
        const owner = await createOrg(s.deps);
        for (const git_repo of PRIVATE) {
          const err = await strictCaller(owner.token)
            .hosting.sites.create({ name: 'x', git_repo, framework: 'react' })
            .then(
              () => undefined,
              (e: unknown) => toAppError(e),
            );
          expect(err?.status, git_repo).to.equal(400);
          expect(err?.code).to.equal('VALIDATION_ERROR');
          expect(err?.details).to.have.length(1);
          expect((err?.details?.[0] as { path: string }).path).to.equal('git_repo');
        }
        expect(await countSites(s.deps, owner.organizationId)).to.equal(0);
      });

      it('WEBHOOK_ALLOW_PRIVATE_TARGETS allows them (as for webhooks), never metadata or link-local', async () => {
        const owner = await createOrg(s.deps, { plan: 'enterprise' });
        for (const git_repo of PRIVATE) {
          const res = await createSite(s.baseUrl, owner.token, { git_repo });
          expect(res.status, `${git_repo}: ${res.text}`).to.equal(201);
        }
        for (const git_repo of [
          'https://169.254.169.254/x',
          'https://[fd00:ec2::254]/x',
          'https://169.254.1.1/x',
        ]) {
          const res = await createSite(s.baseUrl, owner.token, { git_repo });
          expect(res.status, git_repo).to.equal(400);
        }
        // http:// only to the local machines the relaxed rules admit (local testing), never to others.
        expect(
          (await createSite(s.baseUrl, owner.token, { git_repo: 'http://127.0.0.1/x' })).status,
        ).to.equal(201);
        expect(
          (await createSite(s.baseUrl, owner.token, { git_repo: 'http://github.com/acme/web' })).status,
        ).to.equal(400);
      });

      it('applies to updates too', async () => {
        const owner = await createOrg(s.deps);
        const site = await newSite(s.baseUrl, owner.token);
        const err = await strictCaller(owner.token)
          .hosting.sites.update({ id: site.id, git_repo: 'https://10.0.0.5/x.git' })
          .catch((e: unknown) => toAppError(e));
        expect((err as { status: number }).status).to.equal(400);
        const res = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}`, { token: owner.token });
        expect(res.body.site.git_repo).to.equal(GIT_REPO);
      });

      it('over HTTP on a server that refuses private targets: IPv6 forms that embed or hide IPv4, non-global IPv6', async () => {
        const strict = await startTestServer({ env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' } });
        try {
          const owner = await createOrg(strict.deps, { plan: 'enterprise' });
          for (const host of [
            '[::127.0.0.1]', // IPv4-compatible (::/96)
            '[::a9fe:a9fe]', // ::169.254.169.254
            '[64:ff9b::10.0.0.1]', // NAT64 of a private address
            '[2002:a00:1::1]', // 6to4 of 10.0.0.1
            '[2001:0:4136:e378:8000:63bf:3fff:fdd2]', // Teredo
            '[fec0::1]', // site-local
            '[fd00::1]', // unique-local
            '[2001:db8::1]', // documentation
            '[3fff::1]', // documentation (RFC 9637)
          ]) {
            const res = await createSite(strict.baseUrl, owner.token, {
              git_repo: `https://${host}/repo.git`,
            });
            expect(res.status, host).to.equal(400);
            expect(res.body.error.details[0].path).to.equal('git_repo');
          }
          expect(await countSites(strict.deps, owner.organizationId)).to.equal(0);
          expect(
            (
              await createSite(strict.baseUrl, owner.token, {
                git_repo: 'https://[2606:4700:4700::1111]/r.git',
              })
            ).status,
          ).to.equal(201);
        } finally {
          await strict.close();
        }
      });
    });
  });

  describe('custom domains', () => {
    const unique = () => `d${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}.example.org`;

    it('are unique across organizations once verified: 409 CONFLICT, nothing created', async () => {
      const a = await createOrg(s.deps);
      const b = await createOrg(s.deps);
      const domain = unique();
      await markVerified(s, (await newSite(s.baseUrl, a.token, { domain })).id);
      const res = await createSite(s.baseUrl, b.token, { domain });
      expect(res.status, res.text).to.equal(409);
      expect(res.body.error.code).to.equal('CONFLICT');
      expect(res.body.error.message).to.include(domain);
      expect(await countSites(s.deps, b.organizationId)).to.equal(0);
      // Within one organization too.
      expect((await createSite(s.baseUrl, a.token, { domain })).status).to.equal(409);
    });

    it('give 409 on update to a verified domain; setting its own again or null is fine', async () => {
      const owner = await createOrg(s.deps);
      const taken = unique();
      await markVerified(s, (await newSite(s.baseUrl, owner.token, { domain: taken })).id);
      const mine = unique();
      const site = await newSite(s.baseUrl, owner.token, { domain: mine });
      const put = (body: unknown) =>
        http(s.baseUrl, 'PUT', `/v1/hosting/sites/${site.id}`, { token: owner.token, body });
      const clash = await put({ domain: taken });
      expect(clash.status).to.equal(409);
      expect((await put({ domain: mine })).status).to.equal(200);
      const cleared = await put({ domain: null });
      expect(cleared.status).to.equal(200);
      expect(cleared.body.site.domain).to.equal(null);
      // Now free for anyone.
      const other = await createOrg(s.deps);
      expect((await createSite(s.baseUrl, other.token, { domain: mine })).status).to.equal(201);
    });

    it('are freed when their site is deleted', async () => {
      const a = await createOrg(s.deps);
      const domain = unique();
      const site = await newSite(s.baseUrl, a.token, { domain });
      const del = await http(s.baseUrl, 'DELETE', `/v1/hosting/sites/${site.id}`, { token: a.token });
      expect(del.status).to.equal(200);
      expect(del.body).to.deep.equal({ success: true, message: 'Site deleted', id: site.id, domain });
      const b = await createOrg(s.deps);
      expect((await createSite(s.baseUrl, b.token, { domain })).status).to.equal(201);
    });

    it('may be claimed by several organizations while pending (the first to verify wins: hosting.domains.test.ts)', async () => {
      const orgs = await Promise.all(Array.from({ length: 6 }, () => createOrg(s.deps)));
      const domain = unique();
      const results = await Promise.all(orgs.map((o) => createSite(s.baseUrl, o.token, { domain })));
      expect(results.map((r) => r.status)).to.deep.equal([201, 201, 201, 201, 201, 201]);
      for (const r of results) expect(r.body.site.domain_verification.status).to.equal('pending');
    });
  });

  describe('GET /v1/hosting/sites and /v1/hosting/sites/:id', () => {
    it('lists the list view newest first with total, page, limit; filters by framework and status', async () => {
      const owner = await createOrg(s.deps);
      const a = await newSite(s.baseUrl, owner.token, { name: 'A', framework: 'react' });
      const b = await newSite(s.baseUrl, owner.token, { name: 'B', framework: 'vue' });
      const c = await newSite(s.baseUrl, owner.token, { name: 'C', framework: 'vue' });
      const list = await http(s.baseUrl, 'GET', '/v1/hosting/sites?limit=2', { token: owner.token });
      expect(list.status).to.equal(200);
      expect(list.body).to.include({ success: true, total: 3, page: 1, limit: 2 });
      expect(list.body.sites.map((x: any) => x.id)).to.deep.equal([c.id, b.id]);
      for (const site of list.body.sites)
        expect(Object.keys(site).sort()).to.deep.equal([...SITE_KEYS].sort());
      const page2 = await http(s.baseUrl, 'GET', '/v1/hosting/sites?limit=2&page=2', { token: owner.token });
      expect(page2.body.sites.map((x: any) => x.id)).to.deep.equal([a.id]);
      const vue = await http(s.baseUrl, 'GET', '/v1/hosting/sites?framework=vue', { token: owner.token });
      expect(vue.body.sites.map((x: any) => x.id)).to.deep.equal([c.id, b.id]);
      expect(vue.body.total).to.equal(2);
      const active = await http(s.baseUrl, 'GET', '/v1/hosting/sites?status=active', { token: owner.token });
      expect(active.body.total).to.equal(3);
      const { site: detail } = (
        await http(s.baseUrl, 'GET', `/v1/hosting/sites/${a.id}`, { token: owner.token })
      ).body;
      const { build_settings: _b, environment_variables: _e, metrics: _m, ...listed } = detail;
      expect(list.body.sites.find((x: any) => x.id === a.id) ?? page2.body.sites[0]).to.deep.equal(listed);
    });

    it('answers 400 to bad paging or filters', async () => {
      const owner = await createOrg(s.deps);
      for (const q of ['limit=0', 'limit=101', 'page=0', 'page=x', 'framework=svelte', 'status=paused']) {
        const res = await http(s.baseUrl, 'GET', `/v1/hosting/sites?${q}`, { token: owner.token });
        expect(res.status, q).to.equal(400);
        expect(res.body.error.code).to.equal('VALIDATION_ERROR');
      }
    });

    it('shows members their own sites; owners and admins all, or one user’s with ?user_id=', async () => {
      const owner = await createOrg(s.deps);
      const admin = await createUser(s.deps, owner.organizationId, { role: 'admin' });
      const member = await createUser(s.deps, owner.organizationId, {
        permissions: ['hosting:write', 'hosting:delete'],
      });
      const other = await createUser(s.deps, owner.organizationId, { permissions: ['hosting:write'] });
      const o = await newSite(s.baseUrl, owner.token, { name: 'owner' });
      const m = await newSite(s.baseUrl, member.token, { name: 'member' });
      const x = await newSite(s.baseUrl, other.token, { name: 'other' });
      const ids = (token: string, q = '') =>
        http(s.baseUrl, 'GET', `/v1/hosting/sites${q}`, { token }).then((r) =>
          r.body.sites.map((v: any) => v.id),
        );
      expect(await ids(owner.token)).to.deep.equal([x.id, m.id, o.id]);
      expect(await ids(admin.token)).to.deep.equal([x.id, m.id, o.id]);
      expect(await ids(admin.token, `?user_id=${member.id}`)).to.deep.equal([m.id]);
      expect(await ids(member.token)).to.deep.equal([m.id]);
      expect(await ids(member.token, `?user_id=${other.id}`)).to.deep.equal([]);
      expect(m.user_id).to.equal(member.id);
      for (const [method, body] of [
        ['GET', undefined],
        ['PUT', { name: 'stolen' }],
        ['DELETE', undefined],
      ] as const) {
        const res = await http(s.baseUrl, method, `/v1/hosting/sites/${x.id}`, { token: member.token, body });
        expect(res.status, method).to.equal(404);
        expect(res.body.error.code).to.equal('NOT_FOUND');
      }
      expect(
        (await http(s.baseUrl, 'GET', `/v1/hosting/sites/${m.id}`, { token: owner.token })).status,
      ).to.equal(200);
    });

    it('answers 404 for another organization’s site, a malformed id and an unknown one', async () => {
      const a = await createOrg(s.deps);
      const b = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, a.token);
      for (const id of [site.id, 'site_unknown0000000000000', 'nonsense', 'vpn_abc']) {
        const res = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${id}`, { token: b.token });
        expect(res.status, id).to.equal(404);
        expect(res.body.error.code).to.equal('NOT_FOUND');
      }
    });

    it('members need hosting:write to create and hosting:delete to delete (403)', async () => {
      const owner = await createOrg(s.deps);
      const reader = await createUser(s.deps, owner.organizationId);
      const res = await createSite(s.baseUrl, reader.token);
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('FORBIDDEN');
      const writer = await createUser(s.deps, owner.organizationId, { permissions: ['hosting:write'] });
      const site = await newSite(s.baseUrl, writer.token);
      const del = await http(s.baseUrl, 'DELETE', `/v1/hosting/sites/${site.id}`, { token: writer.token });
      expect(del.status).to.equal(403);
      expect((await http(s.baseUrl, 'GET', '/v1/hosting/sites', { token: reader.token })).status).to.equal(
        200,
      );
    });
  });

  describe('PUT /v1/hosting/sites/:id', () => {
    it('changes the fields given, replaces the environment, keeps the address', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token, {
        name: 'Before',
        environment_variables: { A: '1', B: '2' },
      });
      const res = await http(s.baseUrl, 'PUT', `/v1/hosting/sites/${site.id}`, {
        token: owner.token,
        body: {
          name: 'After',
          branch: 'develop',
          environment_variables: { C: '3' },
          node_version: '20',
          build_command: 'npm run build:ci',
        },
      });
      expect(res.status, res.text).to.equal(200);
      expect(res.body.site).to.deep.include({
        id: site.id,
        name: 'After',
        branch: 'develop',
        url: site.url,
        environment_variables: { C: '3' },
        build_settings: { build_command: 'npm run build:ci', output_directory: 'build', node_version: '20' },
      });
      const again = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}`, { token: owner.token });
      expect(again.body.site).to.deep.equal(res.body.site);
    });

    it('refuses bad input and unknown fields with 400, and changes nothing', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token, { branch: 'main' });
      for (const body of [
        { branch: '' },
        { domain: 'UPPER.example.com' },
        { environment_variables: { lower: 'x' } },
        { slug: 'mine' },
        { id: 'site_other' },
        { framework: 'svelte' },
      ]) {
        const res = await http(s.baseUrl, 'PUT', `/v1/hosting/sites/${site.id}`, {
          token: owner.token,
          body,
        });
        expect(res.status, JSON.stringify(body)).to.equal(400);
      }
      const again = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}`, { token: owner.token });
      expect(again.body.site.updated_at).to.equal(site.updated_at);
    });
  });

  describe('DELETE /v1/hosting/sites/:id', () => {
    it('answers {success, message, id, domain}; then 404, and its deployments are gone', async () => {
      const owner = await createOrg(s.deps);
      const site = await newSite(s.baseUrl, owner.token);
      const dep = await newDeployment(s.baseUrl, owner.token, site.id);
      await waitForDeployment(s.baseUrl, owner.token, site.id, dep.id);
      const del = await http(s.baseUrl, 'DELETE', `/v1/hosting/sites/${site.id}`, { token: owner.token });
      expect(del.status).to.equal(200);
      expect(del.body).to.deep.equal({ success: true, message: 'Site deleted', id: site.id, domain: null });
      const again = await http(s.baseUrl, 'DELETE', `/v1/hosting/sites/${site.id}`, { token: owner.token });
      expect(again.status).to.equal(404);
      const gone = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}/deployments/${dep.id}`, {
        token: owner.token,
      });
      expect(gone.status).to.equal(404);
      const rows = await s.deps.db.orm.em
        .fork()
        .execute('select count(*)::int as n from hosting_build_logs where deployment_id = ?', [dep.id]);
      expect(rows[0]!.n).to.equal(0);
    });
  });

  describe('plan limits', () => {
    async function fill(owner: TestUser, n: number) {
      for (let i = 0; i < n; i++) await newSite(s.baseUrl, owner.token, { name: `s${i}` });
    }

    it('answers 402 PLAN_LIMIT_EXCEEDED beyond the starter limit of 5; a deleted site frees its place', async () => {
      const owner = await createOrg(s.deps);
      await fill(owner, 5);
      const res = await createSite(s.baseUrl, owner.token);
      expect(res.status).to.equal(402);
      expect(res.body.error.code).to.equal('PLAN_LIMIT_EXCEEDED');
      expect(res.body.error.details).to.deep.equal([{ resource: 'hosting_sites', limit: 5, current: 5 }]);
      expect(await countSites(s.deps, owner.organizationId)).to.equal(5);
      const list = await http(s.baseUrl, 'GET', '/v1/hosting/sites', { token: owner.token });
      await http(s.baseUrl, 'DELETE', `/v1/hosting/sites/${list.body.sites[0].id}`, { token: owner.token });
      expect((await createSite(s.baseUrl, owner.token)).status).to.equal(201);
    });

    it('lets exactly one of 20 concurrent creates at limit − 1 through', async () => {
      const owner = await createOrg(s.deps);
      await fill(owner, 4);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => createSite(s.baseUrl, owner.token, { name: `race ${i}` })),
      );
      const statuses = results.map((r) => r.status);
      expect(
        statuses.filter((x) => x === 201),
        JSON.stringify(statuses),
      ).to.have.length(1);
      expect(statuses.filter((x) => x === 402)).to.have.length(19);
      expect(await countSites(s.deps, owner.organizationId)).to.equal(5);
    });

    it('allows 25 on pro and counts per organization', async () => {
      const owner = await createOrg(s.deps, { plan: 'pro' });
      await fill(owner, 6);
      const other = await createOrg(s.deps);
      expect((await createSite(s.baseUrl, other.token)).status).to.equal(201);
    });
  });

  describe('ownership', () => {
    it('moves a deleted member’s sites to the user who deleted them', async () => {
      const owner = await createOrg(s.deps);
      const member = await createUser(s.deps, owner.organizationId, { permissions: ['hosting:write'] });
      const site = await newSite(s.baseUrl, member.token);
      const del = await http(s.baseUrl, 'DELETE', `/v1/users/${member.id}`, { token: owner.token });
      expect(del.status, del.text).to.equal(200);
      const res = await http(s.baseUrl, 'GET', `/v1/hosting/sites/${site.id}`, { token: owner.token });
      expect(res.body.site.user_id).to.equal(owner.id);
    });
  });
});
