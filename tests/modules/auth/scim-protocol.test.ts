// Test tier: unit
import { expect } from 'chai';
import {
  applyPatch,
  modelFromBody,
  parseFilter,
  ScimError,
  type ScimUserModel,
} from '../../../server/modules/auth/scim-protocol.js';

/**
 * SCIM's filters and PATCH operations as Okta and Microsoft Entra ID send them (docs/sso.md, "SCIM provisioning"),
 * read without a server.
 */

const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
const USER = 'urn:ietf:params:scim:schemas:core:2.0:User';

const base: ScimUserModel = {
  userName: 'ada@acme.test',
  displayName: 'Ada Lovelace',
  givenName: 'Ada',
  familyName: 'Lovelace',
  formatted: null,
  email: 'ada@acme.test',
  externalId: 'ext-1',
  active: true,
};
const patch = (...ops: unknown[]) => applyPatch(base, { schemas: [PATCH_OP], Operations: ops });
const scimTypeOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    expect(err).to.be.instanceOf(ScimError);
    return (err as ScimError).scimType;
  }
  throw new Error('expected a ScimError');
};

describe('SCIM protocol: filters and PATCH operations', () => {
  describe('parseFilter', () => {
    it('reads eq comparisons joined by and, attribute names in any case', () => {
      expect(parseFilter('userName eq "Ada@Acme.test"')).to.deep.equal({ userName: 'ada@acme.test' });
      expect(parseFilter('emails.value eq "a@b.test"')).to.deep.equal({ userName: 'a@b.test' });
      expect(parseFilter('emails[type eq "work"].value eq "a@b.test"')).to.deep.equal({
        userName: 'a@b.test',
      });
      expect(parseFilter('externalId eq "AbC" and active eq false')).to.deep.equal({
        externalId: 'AbC',
        active: false,
      });
      expect(parseFilter('USERNAME EQ "a@b.test" AND Active Eq True')).to.deep.equal({
        userName: 'a@b.test',
        active: true,
      });
      expect(parseFilter(`${USER}:userName eq "a\\"b@c.test"`)).to.deep.equal({ userName: 'a"b@c.test' });
    });

    it('matches nothing for two values of one attribute, and refuses anything else (invalidFilter)', () => {
      expect(parseFilter('userName eq "a@b.test" and userName eq "c@d.test"')).to.equal(null);
      for (const f of [
        'userName co "a"',
        'userName eq "a" or userName eq "b"',
        'title eq "x"',
        'active eq "yes"',
        'userName eq',
        '(userName eq "a")',
      ]) {
        expect(
          scimTypeOf(() => parseFilter(f)),
          f,
        ).to.equal('invalidFilter');
      }
    });
  });

  describe('applyPatch', () => {
    it('takes Okta’s operation without a path', () => {
      expect(patch({ op: 'replace', value: { active: false } }).active).to.equal(false);
      const named = patch({
        op: 'replace',
        value: { name: { givenName: 'Augusta' }, 'name.familyName': 'King' },
      });
      expect(named).to.include({ givenName: 'Augusta', familyName: 'King' });
    });

    it('takes Entra ID’s capitalized operations with paths and string booleans', () => {
      expect(patch({ op: 'Replace', path: 'active', value: 'False' }).active).to.equal(false);
      expect(patch({ op: 'Replace', path: 'active', value: 'True' }).active).to.equal(true);
      expect(patch({ op: 'Add', path: 'displayName', value: 'Countess' }).displayName).to.equal('Countess');
      expect(patch({ op: 'Remove', path: 'externalId' }).externalId).to.equal(null);
      expect(
        patch({ op: 'Replace', path: 'emails[type eq "work"].value', value: 'X@y.test' }).email,
      ).to.equal('x@y.test');
      const ignored = patch({
        op: 'Add',
        path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department',
        value: 'R&D',
      });
      expect(ignored).to.deep.equal(base);
    });

    it('refuses what it cannot apply', () => {
      expect(scimTypeOf(() => applyPatch(base, { Operations: [] }))).to.equal('invalidSyntax');
      expect(scimTypeOf(() => patch({ op: 'move', path: 'active', value: true }))).to.equal('invalidSyntax');
      expect(scimTypeOf(() => patch({ op: 'remove' }))).to.equal('noTarget');
      expect(scimTypeOf(() => patch({ op: 'replace', path: 'active', value: 'maybe' }))).to.equal(
        'invalidValue',
      );
      expect(scimTypeOf(() => patch({ op: 'remove', path: 'userName' }))).to.equal('mutability');
    });
  });

  describe('modelFromBody', () => {
    it('reads a User, its userName an email, keeping active when left out', () => {
      const m = modelFromBody(
        { schemas: [USER], userName: ' Ada@Acme.test ', name: { formatted: 'Ada' } },
        false,
      );
      expect(m).to.include({ userName: 'ada@acme.test', formatted: 'Ada', active: false, externalId: null });
      expect(scimTypeOf(() => modelFromBody({ userName: 'jdoe' }, true))).to.equal('invalidValue');
      expect(scimTypeOf(() => modelFromBody({ schemas: ['other'], userName: 'a@b.test' }, true))).to.equal(
        'invalidSyntax',
      );
    });
  });
});
