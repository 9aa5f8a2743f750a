// Test tier: process
import { expect } from 'chai';
import { HostingSite } from '../../server/modules/hosting/hosting-site.entity.js';
import { terminalSafe, terminalSafeJson } from '../../client-sdk/src/cli/output.js';
import { createOrg } from '../support/factories.js';
import { sharedServer, type TestServer } from '../support/server.js';
import { newSite } from '../modules/hosting/hosting-helpers.js';
import { expectOk } from './support/cli-expect.js';
import { Terminal } from './support/run-cli.js';

// eslint-disable-next-line no-control-regex -- what must not reach a terminal
const CONTROLS = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/;

/** A name a member could give a site: a window-title escape, colours, a carriage return, a bidi override. */
const HOSTILE = 'Shop\x1b]0;owned\x07\x1b[31mRED\x1b[0m\rX\x9b2J\u202Egnp.exe\u2066';

/** The `cloud` CLI never passes terminal controls it got from the API on to the terminal (client-sdk/README.md). */
describe('cloud CLI: terminal escapes from the API', function () {
  this.timeout(120_000);
  let s: TestServer;
  before(async () => {
    s = await sharedServer();
  });

  it('terminalSafe strips escape sequences, C0 (but \\n, \\t), C1 and bidi controls', () => {
    expect(terminalSafe(HOSTILE)).to.equal('ShopREDX2Jgnp.exe');
    expect(terminalSafe('a\tb\nc\x00d\x7fe')).to.equal('a\tb\ncde');
    const json = terminalSafeJson(JSON.stringify({ name: HOSTILE }));
    expect(JSON.parse(json)).to.deep.equal({ name: HOSTILE });
    expect(json).not.to.match(CONTROLS);
  });

  it('`cloud sites list` and `--json` print a hostile site name without its controls', async () => {
    const owner = await createOrg(s.deps);
    const site = await newSite(s.baseUrl, owner.token, { name: 'Shop' });
    // Stored as a member could have named it (whatever the API accepts today).
    await s.deps.db.orm.em.fork().nativeUpdate(HostingSite, { id: site.id }, { name: HOSTILE });
    const term = new Terminal(s.baseUrl);
    expectOk(
      await term.run(['login', '--email', owner.email, '--password-stdin'], { input: `${owner.password}\n` }),
    );
    const list = expectOk(await term.run(['sites', 'list']));
    expect(list.stdout).to.contain('ShopREDX2Jgnp.exe');
    expect(list.stdout + list.stderr).not.to.match(CONTROLS);

    const asJson = expectOk(await term.run(['sites', 'list', '--json']));
    expect(asJson.stdout).not.to.match(CONTROLS);
    const parsed = JSON.parse(asJson.stdout) as { sites: { name: string }[] };
    expect(parsed.sites.map((x) => x.name)).to.include(HOSTILE);
  });
});
