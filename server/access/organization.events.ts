import { defineEvent } from '../events/define-event.js';
import { ZOrganization } from './organization.dto.js';

/**
 * The organization's events. Emitted by the modules that change an organization's settings (its single sign-on
 * connection in auth, its name, owner and security policy in organization), so declared here, below them. `data.object` is the
 * organization as `GET /organization` shows it.
 */
export const organizationUpdated = defineEvent('organization.updated', ZOrganization, {
  description:
    'The organization’s settings changed: its single sign-on connection (`PUT` or `DELETE /organization/sso`, a ' +
    'domain verified), its security policy (`PUT /organization/security`), its name (`PUT /organization`) or its ' +
    'owner (`POST /organization/transfer-ownership`).',
});

export const ORGANIZATION_EVENTS = [organizationUpdated];
