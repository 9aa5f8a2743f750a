import { router } from '../../trpc/init.js';
import { authEndpointProcedure, authedProcedure, requirePermission } from '../../trpc/procedures.js';
import {
  ZAcceptInvitationInput,
  ZAcceptInvitationOutput,
  ZCreateUserInput,
  ZCreateUserOutput,
  ZDeleteUserOutput,
  ZListUsersInput,
  ZListUsersOutput,
  ZPermissionsOutput,
  ZUpdatePermissionsInput,
  ZUpdateUserInput,
  ZUserIdInput,
  ZUserOutput,
} from './users.schema.js';
import * as users from './users.service.js';

const tags = ['Users'];

export const usersRouter = router({
  list: requirePermission('users:read')
    .meta({
      openapi: {
        method: 'GET',
        path: '/users',
        tags,
        summary: 'List the users of the organization',
        description:
          'Owner and admin (`users:read`). Newest first; filter by `role` and `status`. Deleted users are not listed.',
      },
    })
    .input(ZListUsersInput)
    .output(ZListUsersOutput)
    .query(({ ctx, input }) => users.listUsers(ctx, input)),

  create: requirePermission('users:write')
    .meta({
      openapi: {
        method: 'POST',
        path: '/users',
        tags,
        summary: 'Invite a user',
        description:
          'Owner and admin (`users:write`). Creates the user with status `invited` and an invitation valid for 7 ' +
          'days: sent by mail, or returned as `invitation_url` with `send_invitation: false`. Only the owner may ' +
          'invite an admin. The user starts with the role’s default permissions plus `permissions`. An email ' +
          'already used by a user of this organization → 409 `CONFLICT`; the answer does not depend on other ' +
          'organizations (an address has one sign-in account: accepting tells its holder).',
      },
      errors: { CONFLICT: 'A user with this email already exists in this organization' },
      successStatus: 201,
      location: '/users/{user.id}',
    })
    .input(ZCreateUserInput)
    .output(ZCreateUserOutput)
    .mutation(({ ctx, input }) => users.createUser(ctx, input)),

  get: authedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/users/{id}',
        tags,
        summary: 'Get a user with profile and activity',
        description: 'Any user may read themselves; reading others needs `users:read` (owner and admin).',
      },
    })
    .input(ZUserIdInput)
    .output(ZUserOutput)
    .query(({ ctx, input }) => users.getUser(ctx, input.id)),

  update: authedProcedure
    .meta({
      openapi: {
        method: 'PUT',
        path: '/users/{id}',
        tags,
        summary: 'Update a user',
        description:
          'Anyone may change their own `name` and `profile`, and nothing else of themselves. Owner and admin ' +
          '(`users:write`) change `name`, `profile`, `role`, `permissions` and `status` of members; only the owner ' +
          'grants, changes or revokes `admin`; the owner’s role and status cannot be changed here. Role changes ' +
          'and suspensions apply from the user’s next request. Changing the `status` of a user who has not ' +
          'accepted their invitation yet → 409 `CONFLICT`.',
      },
      errors: { CONFLICT: 'The user has not accepted the invitation yet (a `status` change)' },
    })
    .input(ZUpdateUserInput)
    .output(ZUserOutput)
    .mutation(({ ctx, input }) => users.updateUser(ctx, input)),

  delete: requirePermission('users:delete')
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/users/{id}',
        tags,
        summary: 'Remove a user from the organization',
        description:
          'Owner and admin (`users:delete`). The user’s VPN connections, databases and sites are transferred to ' +
          'the caller in the same transaction, and all their tokens stop working. Nobody deletes themselves or ' +
          'the owner; only the owner deletes an admin. The email can then be invited again.',
      },
    })
    .input(ZUserIdInput)
    .output(ZDeleteUserOutput)
    .mutation(({ ctx, input }) => users.deleteUser(ctx, input.id)),

  getPermissions: authedProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/users/{id}/permissions',
        tags,
        summary: 'Get a user’s permissions as an object',
        description:
          'The object form of the user’s `permissions`: `vpn`, `database`, `hosting` → `{read, write, delete}`, ' +
          '`billing` → `{read, write}`. A string grant `vpn:admin` shows as `vpn: {read: true, write: true, ' +
          'delete: true}`. Anyone may read their own; others need `users:read`.',
      },
    })
    .input(ZUserIdInput)
    .output(ZPermissionsOutput)
    .query(({ ctx, input }) => users.getPermissions(ctx, input.id)),

  updatePermissions: requirePermission('users:write')
    .meta({
      openapi: {
        method: 'PUT',
        path: '/users/{id}/permissions',
        tags,
        summary: 'Change a user’s permissions through the object form',
        description:
          'Owner and admin (`users:write`), for members (admins: owner only). Absent resources and levels stay as ' +
          'they are. Nobody grants a permission they do not hold, nor changes their own. The string form of ' +
          '`PUT /users/{id}` and this object form edit the same set.',
      },
    })
    .input(ZUpdatePermissionsInput)
    .output(ZPermissionsOutput)
    .mutation(({ ctx, input }) => users.updatePermissions(ctx, input)),

  acceptInvitation: authEndpointProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/auth/invitations/accept',
        tags: ['Authentication'],
        summary: 'Accept an invitation: set the password and activate the account',
        description:
          'Takes the `token` of the invitation link. The token works once and expires 7 days after the ' +
          'invitation; an unknown, used or expired token → 401 `INVALID_CREDENTIALS`. An address has one ' +
          'sign-in account across the platform: when the invited address already has one in another ' +
          'organization → 409 `CONFLICT` and the invitation stays pending. Then sign in with `POST /auth/login`.',
        protect: false,
      },
      errors: {
        INVALID_CREDENTIALS: 'Unknown, already used or expired invitation token',
        CONFLICT: 'The address already has a sign-in account in another organization',
      },
    })
    .input(ZAcceptInvitationInput)
    .output(ZAcceptInvitationOutput)
    .mutation(({ ctx, input }) => users.acceptInvitation(ctx, input)),
});
