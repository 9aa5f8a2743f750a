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

const all = (r: PermissionResource): Permission[] => PERMISSION_LEVELS.map((l) => `${r}:${l}` as const);

/**
 * What each role starts with (docs/users-and-permissions.md): the one table of role defaults. A user's permission set is
 * initialised from it when the user is created or changes role, and may then be changed grant by grant. The owner
 * always holds everything, whatever is stored.
 */
export const ROLE_DEFAULT_PERMISSIONS: Record<Role, readonly Permission[]> = {
  owner: PERMISSIONS,
  admin: [...all('vpn'), ...all('database'), ...all('hosting'), ...all('users'), 'billing:read'],
  member: ['vpn:read', 'database:read', 'hosting:read'],
};

const ORDER = new Map<string, number>(PERMISSIONS.map((p, i) => [p, i]));
const byTableOrder = (a: Permission, b: Permission) => ORDER.get(a)! - ORDER.get(b)!;

/**
 * The canonical form of a permission set, as stored and shown: known strings only, each `<resource>:admin` joined
 * by the three levels it implies, no duplicates, in table order (resource, then read/write/delete/admin).
 */
export function normalizePermissions(list: Iterable<string>): Permission[] {
  const out = new Set<Permission>();
  for (const s of list) {
    if (!isPermission(s)) continue;
    out.add(s);
    const [resource, level] = s.split(':') as [PermissionResource, PermissionLevel];
    if (level === 'admin') for (const q of all(resource)) out.add(q);
  }
  return [...out].sort(byTableOrder);
}

/** The set a new user (or a user changing role) starts with: the role's defaults plus explicit grants. */
export function initialPermissions(role: Role, grants: Iterable<string> = []): Permission[] {
  return normalizePermissions([...ROLE_DEFAULT_PERMISSIONS[role], ...grants]);
}

/** What a user may do: everything for the owner, otherwise the stored set (with `admin` implying the levels). */
interface Effective {
  set: ReadonlySet<Permission>;
  /** The same set in canonical order, as shown in user views. */
  list: readonly Permission[];
}
const effectiveCache = new Map<string, Effective>();

// Computed for every authenticated request from a handful of distinct (role, set) pairs: memoised, and shared
// read-only between requests.
function effective(role: Role, stored: readonly string[]): Effective {
  const key = role === 'owner' ? 'owner' : `${role}|${stored.join(',')}`;
  let e = effectiveCache.get(key);
  if (!e) {
    if (effectiveCache.size >= 1000) effectiveCache.clear();
    const list = Object.freeze(normalizePermissions(role === 'owner' ? PERMISSIONS : stored));
    e = { set: new Set(list), list };
    effectiveCache.set(key, e);
  }
  return e;
}

export function effectivePermissions(role: Role, stored: readonly string[]): ReadonlySet<Permission> {
  return effective(role, stored).set;
}

/** `effectivePermissions` as the canonical list of user views. */
export function effectivePermissionList(role: Role, stored: readonly string[]): readonly Permission[] {
  return effective(role, stored).list;
}

/**
 * The object form of `GET/PUT /users/:id/permissions`: resource → booleans. `billing` carries `read` and `write`;
 * `users:*` grants and `billing:delete` have no place in it and are left untouched by writes through it. A
 * `<resource>:admin` grant shows as all of the resource's booleans true.
 */
export const OBJECT_FORM_LEVELS = {
  vpn: ['read', 'write', 'delete'],
  database: ['read', 'write', 'delete'],
  hosting: ['read', 'write', 'delete'],
  billing: ['read', 'write'],
} as const satisfies Partial<Record<PermissionResource, readonly PermissionLevel[]>>;
export type ObjectFormResource = keyof typeof OBJECT_FORM_LEVELS;
export const OBJECT_FORM_RESOURCES = Object.keys(OBJECT_FORM_LEVELS) as ObjectFormResource[];

export type PermissionObject = {
  [R in ObjectFormResource]: { [L in (typeof OBJECT_FORM_LEVELS)[R][number]]: boolean };
};
/** A partial update of the object form: absent resources and levels stay as they are. */
export type PermissionObjectPatch = {
  [R in ObjectFormResource]?:
    { [L in (typeof OBJECT_FORM_LEVELS)[R][number]]?: boolean | undefined } | undefined;
};

/** The object view of a permission set. */
export function toPermissionObject(set: Iterable<string>): PermissionObject {
  const has = new Set(normalizePermissions(set));
  const out: Record<string, Record<string, boolean>> = {};
  for (const r of OBJECT_FORM_RESOURCES) {
    out[r] = Object.fromEntries(OBJECT_FORM_LEVELS[r].map((l) => [l, has.has(`${r}:${l}`)]));
  }
  return out as PermissionObject;
}

/**
 * Applies an object-form update to a stored set and returns the new canonical set. A level set to false also drops
 * `<resource>:admin` (which implies it); a resource left all true keeps an `admin` grant it had. So a set read in
 * either form and written back in the other is unchanged.
 */
export function applyPermissionObject(stored: Iterable<string>, patch: PermissionObjectPatch): Permission[] {
  const out = new Set(normalizePermissions(stored));
  for (const r of OBJECT_FORM_RESOURCES) {
    const levels = patch[r] as Record<string, boolean | undefined> | undefined;
    if (!levels) continue;
    for (const l of OBJECT_FORM_LEVELS[r]) {
      const v = levels[l];
      if (v === true) out.add(`${r}:${l}`);
      if (v === false) {
        out.delete(`${r}:${l}`);
        out.delete(`${r}:admin`);
      }
    }
  }
  return normalizePermissions(out);
}
