// Test tier: unit
import { expect } from 'chai';
import {
  applyPermissionObject,
  effectivePermissions,
  initialPermissions,
  normalizePermissions,
  PERMISSIONS,
  ROLE_DEFAULT_PERMISSIONS,
  toPermissionObject,
} from '../../server/access/permissions.js';

describe('permission model (server/access/permissions.ts)', () => {
  it('has one table of role defaults (docs/users-and-permissions.md)', () => {
    expect(ROLE_DEFAULT_PERMISSIONS.member).to.deep.equal(['vpn:read', 'database:read', 'hosting:read']);
    expect(ROLE_DEFAULT_PERMISSIONS.admin).to.include.members(['users:read', 'users:write', 'users:delete']);
    expect(ROLE_DEFAULT_PERMISSIONS.admin).to.include('billing:read');
    expect(ROLE_DEFAULT_PERMISSIONS.admin).to.not.include('billing:write');
    expect(ROLE_DEFAULT_PERMISSIONS.owner).to.deep.equal(PERMISSIONS);
  });

  it('lets the admin level imply read, write and delete', () => {
    expect(normalizePermissions(['vpn:admin'])).to.deep.equal([
      'vpn:read',
      'vpn:write',
      'vpn:delete',
      'vpn:admin',
    ]);
    const set = effectivePermissions('member', ['database:admin']);
    expect([...set]).to.have.members([
      'database:read',
      'database:write',
      'database:delete',
      'database:admin',
    ]);
    expect(set.has('vpn:read')).to.equal(false);
  });

  it('gives the owner everything whatever is stored, and others exactly their stored set', () => {
    expect(effectivePermissions('owner', []).size).to.equal(PERMISSIONS.length);
    expect([...effectivePermissions('member', [])]).to.deep.equal([]);
    expect([...effectivePermissions('admin', ['vpn:read', 'bogus:read'])]).to.deep.equal(['vpn:read']);
  });

  it('starts a user from the role defaults plus grants', () => {
    expect(initialPermissions('member', ['vpn:write'])).to.deep.equal([
      'vpn:read',
      'vpn:write',
      'database:read',
      'hosting:read',
    ]);
  });

  it('shows the object form as a view of the same set', () => {
    expect(toPermissionObject(['vpn:admin', 'billing:read', 'users:read'])).to.deep.equal({
      vpn: { read: true, write: true, delete: true },
      database: { read: false, write: false, delete: false },
      hosting: { read: false, write: false, delete: false },
      billing: { read: true, write: false },
    });
  });

  it('round-trips string → object → string, keeping admin grants and what the object form cannot show', () => {
    for (const stored of [
      normalizePermissions(['vpn:admin', 'users:read', 'billing:delete']),
      normalizePermissions(['hosting:write', 'database:delete']),
      normalizePermissions(PERMISSIONS),
      [],
    ]) {
      const object = toPermissionObject(stored);
      expect(applyPermissionObject(stored, object)).to.deep.equal(stored);
    }
  });

  it('round-trips object → string → object', () => {
    const object = {
      vpn: { read: true, write: false, delete: true },
      database: { read: false, write: true, delete: false },
      hosting: { read: false, write: false, delete: false },
      billing: { read: true, write: true },
    };
    const strings = applyPermissionObject([], object);
    expect(toPermissionObject(normalizePermissions(strings))).to.deep.equal(object);
  });

  it('drops the admin level when one of its levels is turned off, and leaves absent resources alone', () => {
    const after = applyPermissionObject(normalizePermissions(['vpn:admin', 'users:admin', 'hosting:read']), {
      vpn: { delete: false },
    });
    expect(after).to.deep.equal([
      'vpn:read',
      'vpn:write',
      'hosting:read',
      'users:read',
      'users:write',
      'users:delete',
      'users:admin',
    ]);
  });
});
