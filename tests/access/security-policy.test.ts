// Test tier: unit
import { expect } from 'chai';
import {
  enforceSecurityPolicy,
  policyInForce,
  sessionEndUnder,
  type PolicySubject,
} from '../../server/access/security-policy.js';
import type { AppError } from '../../server/lib/errors.js';
import { ipRangeSetOf, normalizeIpRanges, parseIpRange } from '../../server/lib/ip-ranges.js';

/** The address ranges and the per-request rules of the security policy (docs/organization.md, "Security policies"). */
describe('security policy: address ranges and the per-request rules', () => {
  it('parses ranges into their canonical form and refuses what is not one', () => {
    const canonical: [string, string][] = [
      ['10.1.2.3/8', '10.0.0.0/8'],
      ['203.0.113.5', '203.0.113.5/32'],
      [' 192.0.2.0/24 ', '192.0.2.0/24'],
      ['2001:DB8:0:0::1/32', '2001:db8::/32'],
      ['2001:db8::1', '2001:db8::1/128'],
      ['::ffff:10.0.0.0/104', '10.0.0.0/8'],
      ['::ffff:198.51.100.7', '198.51.100.7/32'],
      ['::/0', '::/0'],
      ['0.0.0.0/0', '0.0.0.0/0'],
    ];
    for (const [text, expected] of canonical) expect(parseIpRange(text)?.text, text).to.equal(expected);
    for (const bad of [
      '',
      'example.com',
      '10.0.0.0/33',
      '2001:db8::/129',
      '127.1',
      '0x7f.0.0.1/8',
      'fe80::1%eth0/64',
      '10.0.0.0/-1',
      '10.0.0.0/8/8',
      '[::1]/128',
    ]) {
      expect(parseIpRange(bad), bad).to.equal(null);
    }
    expect(normalizeIpRanges(['10.0.0.1/8', '10.9.9.9/8', '::ffff:10.0.0.0/104'])).to.deep.equal([
      '10.0.0.0/8',
    ]);
  });

  it('matches client addresses, IPv4-mapped IPv6 as IPv4', () => {
    const set = ipRangeSetOf(['203.0.113.0/24', '2001:db8::/32']);
    for (const ip of ['203.0.113.1', '::ffff:203.0.113.200', '2001:db8:ffff::1'])
      expect(set.contains(ip), ip).to.equal(true);
    for (const ip of [
      '203.0.114.1',
      '::ffff:198.51.100.1',
      '2001:db9::1',
      '::1',
      'not an address',
      undefined,
    ])
      expect(set.contains(ip), String(ip)).to.equal(false);
  });

  const stored = {
    plan: 'enterprise' as const,
    require_two_factor: false,
    allowed_ip_ranges: [],
    session_max_age: null,
  };
  const subject = (over: Partial<PolicySubject> = {}): PolicySubject => ({
    policy: policyInForce({ ...stored, require_two_factor: true, allowed_ip_ranges: ['10.0.0.0/8'] }),
    user: { twoFactorEnabled: false },
    sessionMethod: 'password',
    ...over,
  });
  const codeOf = (fn: () => void) => {
    try {
      fn();
      return 'ok';
    } catch (err) {
      return (err as AppError).code;
    }
  };

  it('applies nothing when nothing is set or the plan lacks it', () => {
    expect(policyInForce(stored)).to.equal(null);
    expect(policyInForce({ ...stored, plan: 'pro', require_two_factor: true })).to.equal(null);
    expect(policyInForce({ ...stored, session_max_age: 7200 })?.sessionMaxAgeSeconds).to.equal(7200);
  });

  it('refuses outside the ranges first, then users without two-factor but on the exempt procedures', () => {
    expect(codeOf(() => enforceSecurityPolicy(subject(), '192.0.2.1', 'auth.me'))).to.equal('IP_NOT_ALLOWED');
    expect(
      codeOf(() =>
        enforceSecurityPolicy(subject({ apiKeyId: 'key_x' }), '192.0.2.1', 'vpn.connections.list'),
      ),
    ).to.equal('IP_NOT_ALLOWED');
    expect(codeOf(() => enforceSecurityPolicy(subject(), '10.1.1.1', 'vpn.connections.list'))).to.equal(
      'TWO_FACTOR_REQUIRED',
    );
    for (const path of ['auth.me', 'auth.logout', 'auth.twoFactor.setup', 'auth.twoFactor.enable'])
      expect(
        codeOf(() => enforceSecurityPolicy(subject(), '10.1.1.1', path)),
        path,
      ).to.equal('ok');
    expect(
      codeOf(() => enforceSecurityPolicy(subject({ user: { twoFactorEnabled: true } }), '10.1.1.1', 'x')),
    ).to.equal('ok');
    expect(codeOf(() => enforceSecurityPolicy(subject({ sessionMethod: 'sso' }), '10.1.1.1', 'x'))).to.equal(
      'ok',
    );
    expect(
      codeOf(() =>
        enforceSecurityPolicy(subject({ apiKeyId: 'key_x', sessionMethod: undefined }), '10.1.1.1', 'x'),
      ),
    ).to.equal('ok');
  });

  it('ends a session at the earlier of its own end and the bound', () => {
    const created = new Date('2026-12-01T00:00:00Z');
    const end = new Date('2026-12-01T03:00:00Z');
    expect(sessionEndUnder(null, created, end)).to.equal(end);
    expect(sessionEndUnder(7200, created, end).toISOString()).to.equal('2026-12-01T02:00:00.000Z');
    expect(sessionEndUnder(86_400, created, end)).to.equal(end);
  });
});
