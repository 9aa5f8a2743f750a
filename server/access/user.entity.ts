import { defineEntity, p, type EntityManager, type RequiredEntityData } from '@mikro-orm/core';
import { BaseSchema } from '../db/base.entity.js';
import { Organization } from './organization.entity.js';

export const ROLES = ['owner', 'admin', 'member'] as const;
/** The roles `POST /users` and `PUT /users/:id` may give: one owner per organization, made at registration. */
export const ASSIGNABLE_ROLES = ['admin', 'member'] as const;
export type Role = (typeof ROLES)[number];
export const USER_STATUSES = ['invited', 'active', 'suspended'] as const;
export type UserStatus = (typeof USER_STATUSES)[number];

export const UserSchema = defineEntity({
  name: 'User',
  tableName: 'users',
  extends: BaseSchema,
  indexes: [
    // A page for any combination of the list's filters is a range of this index (migration 30, list_counts).
    {
      name: 'users_filter_index',
      expression:
        'create index "users_filter_index" on "users" ("organization_id", "role", "status", "created_at" desc, "id" desc) where "deleted_at" is null',
    },
    { name: 'users_organization_id_index', properties: ['organization', 'createdAt'] },
    // The organization's user list: newest first, deleted users left out.
    // Written as SQL: the ORM reads a descending `id` after a column named `…_id` back as ascending, so it
    // compares such an index by name only; tests/db/schema-drift.test.ts compares its definition.
    {
      name: 'users_organization_list_index',
      expression:
        'create index "users_organization_list_index" on "users" ("organization_id", "created_at" desc, "id" desc) where "deleted_at" is null',
    },
  ],
  uniques: [
    // One user per (organization, email), and one sign-in account per email across the platform: invited rows are
    // left out, so a pending invitation reserves nothing outside its organization (migration 20261127000010).
    {
      name: 'users_organization_email_unique',
      expression:
        'create unique index "users_organization_email_unique" on "users" ("organization_id", "email") where "deleted_at" is null',
    },
    {
      name: 'users_account_email_unique',
      expression:
        'create unique index "users_account_email_unique" on "users" ("email") where "deleted_at" is null and "status" <> \'invited\'',
    },
  ],
  properties: {
    organization: () => p.manyToOne(Organization),
    /**
     * Lower-cased. Unique in the organization among users not deleted; unique across the platform among sign-in
     * accounts (status other than `invited`), because login is by email alone. A deleted user's email can be
     * invited again.
     */
    email: p.string().length(320),
    name: p.string().length(200),
    passwordHash: p.string().nullable().hidden().lazy(),
    role: p.enum(ROLES),
    status: p.enum(USER_STATUSES).default('active'),
    /**
     * The user's permission set, `<resource>:<level>` strings in canonical form (access/permissions.ts): initialised
     * from the role's defaults, changed grant by grant. Ignored for the owner, who holds everything.
     */
    permissions: p.array().default([]),
    twoFactorEnabled: p.boolean().default(false),
    lastLogin: p.datetime(3).nullable().columnType('timestamptz(3)'),
    avatarUrl: p.string().length(2048).nullable(),
    timezone: p.string().length(64).nullable(),
    language: p.string().length(16).nullable(),
    /** Set when the user is removed from the organization; such a user is not found anywhere. */
    deletedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});

export class User extends UserSchema.class {}
UserSchema.setClass(User);

/** What a creator decides about a new user; everything else starts empty (no login yet, no 2FA, default profile). */
export type NewUserData = Pick<
  RequiredEntityData<User>,
  'id' | 'organization' | 'email' | 'name' | 'passwordHash' | 'role' | 'status' | 'permissions'
>;

/** Creates a user in the unit of work, with every field set so the entity can be shown before it is flushed. */
export function createUserEntity(em: EntityManager, data: NewUserData): User {
  return em.create(User, {
    twoFactorEnabled: false,
    lastLogin: null,
    avatarUrl: null,
    timezone: null,
    language: null,
    deletedAt: null,
    ...data,
  });
}

/**
 * The filter of the one sign-in account of an address: not deleted and not `invited` (an invitation may be pending
 * in several organizations for an address that has an account in none, or in another one).
 */
export function signInAccountOf(email: string) {
  return { email, deletedAt: null, status: { $ne: 'invited' as const } };
}
