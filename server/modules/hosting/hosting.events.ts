import { defineEvent } from '../../events/define-event.js';
import { ZDeployment } from './hosting.schema.js';

export const hostingDeploymentSucceeded = defineEvent('hosting.deployment.succeeded', ZDeployment, {
  description: 'A deployment built successfully and became the live one of its site (`data.object.site_id`).',
});
export const hostingDeploymentFailed = defineEvent('hosting.deployment.failed', ZDeployment, {
  description:
    'A build failed (`data.object.status_message` says why); the site keeps serving what it served.',
});
