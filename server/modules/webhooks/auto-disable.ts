import { repositoryOf } from '../../kit/runtime.js';
import type { AppDeps } from '../../kit/deps.js';
import { formatDuration } from './webhook-durations.js';

/** A webhook that the delivery worker has just disabled after a run of failures. */
export interface DisabledWebhook {
  id: string;
  organization_id: string;
  url: string;
  failing_since: Date | string;
}

/**
 * Tells the organization's owner and admins (active users) that a webhook was disabled because every attempt failed
 * for `WEBHOOK_DISABLE_AFTER`, through the mail driver (docs/webhooks.md, "Webhooks"). Runs after the commit that disabled it.
 */
export async function notifyAutoDisabled(deps: AppDeps, hooks: DisabledWebhook[]): Promise<void> {
  const repository = repositoryOf(deps, 'webhooks');
  const em = repository.fork();
  for (const hook of hooks) {
    const recipients = await repository.adminEmails(em, hook.organization_id);
    const since = new Date(hook.failing_since).toISOString();
    const text = [
      `Every delivery attempt to your webhook ${hook.id} (${hook.url}) has failed since ${since}, for more than ` +
        `${formatDuration(deps.config.webhook.disableAfterMs)}, so it has been disabled: it receives no events now.`,
      '',
      `Once the receiver answers 2xx again, enable the webhook with PUT ${deps.config.publicBaseUrl}/v1/webhooks/${hook.id} ` +
        `{"active": true}, then queue what it missed with POST ${deps.config.publicBaseUrl}/v1/webhooks/${hook.id}/recover ` +
        `{"since": "${since}"}.`,
    ].join('\n');
    for (const email of recipients) {
      await deps.mail.send({
        to: email,
        subject: `Webhook disabled: ${hook.url}`,
        text,
        kind: 'webhook_disabled',
      });
    }
    deps.log.warn(
      { webhookId: hook.id, failingSince: since },
      'webhook disabled after a run of failed deliveries',
    );
  }
}
