import { defineEntity, p } from '@mikro-orm/core';
import { BaseSchema } from '../db/base.entity.js';
import { Organization } from './organization.entity.js';

export const ROLES = ['owner', 'admin', 'member'] as const;
export type Role = (typeof ROLES)[number];
export const USER_STATUSES = ['invited', 'active', 'suspended'] as const;
export type UserStatus = (typeof USER_STATUSES)[number];

export const UserSchema = defineEntity({
  name: 'User',
  tableName: 'users',
  extends: BaseSchema,
  properties: {
    organization: () => p.manyToOne(Organization).index(),
    /** Lower-cased; unique across the platform because login is by email alone. */
    email: p.string().length(320).unique(),
    name: p.string().length(200),
    passwordHash: p.string().nullable().hidden().lazy(),
    role: p.enum(ROLES),
    status: p.enum(USER_STATUSES).default('active'),
    /** Explicit grants beyond the role's defaults, as `<resource>:<level>` strings. */
    permissions: p.array().default([]),
    twoFactorEnabled: p.boolean().default(false),
    lastLogin: p.datetime(3).nullable().columnType('timestamptz(3)'),
    avatarUrl: p.string().length(2048).nullable(),
    timezone: p.string().length(64).nullable(),
    language: p.string().length(16).nullable(),
    deletedAt: p.datetime(3).nullable().columnType('timestamptz(3)'),
  },
});

export class User extends UserSchema.class {}
UserSchema.setClass(User);
