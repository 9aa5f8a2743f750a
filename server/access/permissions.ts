import type { Role } from './user.entity.js';

export const PERMISSION_RESOURCES = ['vpn', 'database', 'hosting', 'billing', 'users'] as const;
export type PermissionResource = (typeof PERMISSION_RESOURCES)[number];
export const PERMISSION_LEVELS = ['read', 'write', 'delete', 'admin'] as const;
export type PermissionLevel = (typeof PERMISSION_LEVELS)[number];

/** Every permission string, `<resource>:<level>`. */
export const PERMISSIONS = PERMISSION_RESOURCES.flatMap((r) =>
  PERMISSION_LEVELS.map((l) => `${r}:${l}` as const),
);
export type Permission = `${PermissionResource}:${PermissionLevel}`;

export function isPermission(s: string): s is Permission {
  return (PERMISSIONS as readonly string[]).includes(s);
}

const all = (r: PermissionResource): Permission[] => PERMISSION_LEVELS.map((l) => `${r}:${l}` as Permission);

/** What each role has without any explicit grant (conventions §5). */
export const ROLE_DEFAULT_PERMISSIONS: Record<Role, readonly Permission[]> = {
  owner: PERMISSIONS,
  admin: [...all('vpn'), ...all('database'), ...all('hosting'), ...all('users'), 'billing:read'],
  member: ['vpn:read', 'database:read', 'hosting:read'],
};

/** The effective permission set: role defaults plus explicit grants, with `admin` implying the other levels. */
export function effectivePermissions(role: Role, grants: readonly string[]): Set<Permission> {
  const out = new Set<Permission>(ROLE_DEFAULT_PERMISSIONS[role]);
  for (const g of grants) if (isPermission(g)) out.add(g);
  for (const p of [...out]) {
    const [resource, level] = p.split(':') as [PermissionResource, PermissionLevel];
    if (level === 'admin') for (const q of all(resource)) out.add(q);
  }
  return out;
}

export function hasPermission(role: Role, grants: readonly string[], needed: Permission): boolean {
  return effectivePermissions(role, grants).has(needed);
}
