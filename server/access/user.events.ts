import { defineEvent } from '../events/define-event.js';
import { ZUserDetail, ZUserSummary } from './user.dto.js';

/**
 * The user events. Emitted by the auth and users modules alike, so declared here, below both. `user.created` and
 * `user.updated` carry the detail view (as `GET /users/:id` shows it), `user.deleted` and `user.login` the summary.
 */
export const userCreated = defineEvent('user.created', ZUserDetail, {
  description: 'A user registered (with a new organization) or was invited (`POST /users`).',
});
export const userUpdated = defineEvent('user.updated', ZUserDetail, {
  description: 'A user’s profile, role, status or permissions changed, or they accepted their invitation.',
});
export const userDeleted = defineEvent('user.deleted', ZUserSummary, {
  description: 'A user was removed from the organization (`DELETE /users/:id`).',
});
export const userLogin = defineEvent('user.login', ZUserSummary, {
  description: 'A user signed in.',
});

export const USER_EVENTS = [userCreated, userUpdated, userDeleted, userLogin];
