import ipaddr from 'ipaddr.js';
import {
  blockedAddressReason,
  checkUrlSyntax,
  systemResolver,
  type AddressPolicy,
  type Resolver,
} from '../../lib/safe-http.js';

/**
 * How a real build fetches `git_repo` (docs/hosting.md, "Fetching"): the address rules of webhook URLs
 * (server/lib/safe-http.ts), applied once, with git then held to the checked address.
 *
 * The host is resolved once here and every address it has must be allowed; git is told to connect to that address
 * (`http.curloptResolve`, so curl does no lookup of its own and DNS cannot answer differently the second time), not
 * to follow redirects, to speak only https (http too when `WEBHOOK_ALLOW_PRIVATE_TARGETS` relaxes the rules, for
 * local testing), with no credential helper, no prompt, no hooks and no system or user configuration. `file://`,
 * `ssh://`, `ext::` and the like never pass the URL check, and `protocol.allow=never` refuses them again should a
 * submodule or an alternate name them.
 */

export type GitTarget =
  { ok: true; url: string; host: string; port: number; address: string } | { ok: false; reason: string };

export async function resolveGitTarget(
  raw: string,
  policy: AddressPolicy,
  resolver: Resolver = systemResolver,
): Promise<GitTarget> {
  const check = checkUrlSyntax(raw, policy);
  if (!check.ok) return { ok: false, reason: `the URL ${check.reason}` };
  const url = check.url;
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
  let addresses: string[];
  if (ipaddr.isValid(host)) addresses = [host];
  else {
    try {
      addresses = await resolver(host.replace(/\.$/, ''));
    } catch {
      return { ok: false, reason: `the host ${host} could not be resolved` };
    }
  }
  if (addresses.length === 0) return { ok: false, reason: `the host ${host} has no address` };
  for (const address of addresses) {
    const reason = blockedAddressReason(address, policy);
    if (reason) return { ok: false, reason: `the host ${host} resolves to a ${reason}` };
  }
  // http:// only to the local or private machines that the relaxed rules allow (local testing), never elsewhere.
  if (url.protocol === 'http:' && addresses.some((a) => !blockedAddressReason(a, { allowPrivate: false }))) {
    return { ok: false, reason: 'the URL must use https://' };
  }
  return { ok: true, url: url.href, host, port, address: addresses[0]! };
}

/** `git -c …` options that hold git to the checked address and to nothing but fetching. */
export function gitSafetyOptions(target: Extract<GitTarget, { ok: true }>, policy: AddressPolicy): string[] {
  const address = ipaddr.IPv6.isValid(target.address) ? `[${target.address}]` : target.address;
  const opts = [
    'protocol.allow=never',
    'protocol.https.allow=always',
    ...(policy.allowPrivate ? ['protocol.http.allow=always'] : []),
    'http.followRedirects=false',
    'credential.helper=',
    'core.askPass=',
    'core.hooksPath=/dev/null',
    'core.fsmonitor=false',
    'core.symlinks=true',
    'submodule.recurse=false',
    'advice.detachedHead=false',
    'init.defaultBranch=main',
  ];
  if (!ipaddr.isValid(target.host)) opts.push(`http.curloptResolve=${target.host}:${target.port}:${address}`);
  return opts.flatMap((o) => ['-c', o]);
}

/** The environment of git: nothing of the server's, no prompt, no system or global configuration. */
export function gitEnv(home: string, path: string): Record<string, string> {
  return {
    PATH: path,
    HOME: home,
    LANG: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_PROTOCOL_FROM_USER: '0',
  };
}
