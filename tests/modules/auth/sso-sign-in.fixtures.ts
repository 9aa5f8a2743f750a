import { randomBytes } from 'node:crypto';
import type { AppDeps } from '../../../server/kit/deps.js';
import { newId } from '../../../server/lib/ids.js';
import { ssoRepositoryOf } from '../../../server/modules/auth/sso.repository.js';
import {
  consumeSsoState,
  finishSignIn,
  startSso,
  type SsoAnswer,
  type SsoIdentity,
} from '../../../server/modules/auth/sso-sign-in.service.js';
import { createInProcessContext } from '../../../server/trpc/context.js';
import { testKeyPair } from '../../support/saml-idp.js';

/**
 * Single sign-on set up in the database for tests of the sign-in (docs/sso.md, "Signing in"): a SAML connection (no
 * request leaves the process to start a sign-in) and a domain of the organization, verified unless told.
 */
export async function ssoSignInSetUp(
  deps: AppDeps,
  organizationId: string,
  opts: { verified?: boolean; connection?: boolean; defaultRole?: 'admin' | 'member'; domain?: string } = {},
): Promise<{ domain: string }> {
  const domain = opts.domain ?? `acme-${randomBytes(5).toString('hex')}.test`;
  const sso = ssoRepositoryOf(deps);
  const now = deps.clock.now();
  await sso.transaction(deps.db.orm.em.fork(), async (tx) => {
    if (opts.connection !== false) {
      sso.createConnection(tx, {
        id: newId('sso'),
        now,
        organizationId,
        protocol: 'saml',
        issuer: null,
        clientId: null,
        clientSecret: null,
        idpEntityId: `https://idp.${domain}/saml`,
        idpSsoUrl: `https://idp.${domain}/sso`,
        idpCertificate: testKeyPair().certificate,
        defaultRole: opts.defaultRole ?? 'member',
        enforced: false,
      });
    }
    await sso.replaceDomains(tx, organizationId, [domain], now, () => randomBytes(16).toString('hex'));
    if (opts.verified !== false) await sso.markDomainVerified(tx, organizationId, domain, now);
  });
  return { domain };
}

/** The state a started sign-in sends to the IdP (SAML's RelayState). */
export function stateOf(authorizationUrl: string): string {
  const state = new URL(authorizationUrl).searchParams.get('RelayState');
  if (!state) throw new Error(`no RelayState in ${authorizationUrl}`);
  return state;
}

/**
 * A sign-in started for `email` and finished with `identity` (as the callback or the ACS hands it over once the IdP's
 * answer checked out): the answer to the browser.
 */
export async function ssoSignIn(
  deps: AppDeps,
  email: string,
  identity: SsoIdentity = { email },
  opts: { returnTo?: string; assertion?: { id: string; notOnOrAfter: Date } } = {},
): Promise<SsoAnswer> {
  const started = await startSso(createInProcessContext(deps), {
    email,
    ...(opts.returnTo ? { return_to: opts.returnTo } : {}),
  });
  const signIn = await consumeSsoState(deps, stateOf(started.authorization_url));
  return finishSignIn(deps, signIn, identity, opts.assertion ? { assertion: opts.assertion } : {});
}

/** The one-time code on the page of a sign-in without `return_to`; throws when the page shows none. */
export function codeOnPage(answer: SsoAnswer): string {
  const code = /<code>(ssoc_[A-Za-z0-9_-]+)<\/code>/.exec(answer.body)?.[1];
  if (answer.status !== 200 || !code) throw new Error(`no code: ${answer.status} ${answer.body}`);
  return code;
}
