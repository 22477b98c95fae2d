import { METADATA_REFUSAL, refusal } from '../net/addresses.js';
import type { Config } from './schema.js';

/**
 * What a valid document still gets wrong, or makes easy to get wrong later.
 * One line per problem, `<path>: warning: ...`:
 *  - A webhook without `id` takes one derived from its url, so a url change
 *    makes it another webhook: the payloads still waiting for the old id are
 *    dead-lettered as `webhook_removed` once no running process has it (see
 *    asset_webhooks.record_configuration). Said with the id to write down.
 *  - A webhook whose URL names an address the delivery guard always refuses
 *    (an IP address, or `localhost`), so every delivery to it would end
 *    `address_refused` and in the dead-letter store. Host names are resolved
 *    at delivery time and are not judged here.
 *  - `paused` on a disabled webhook, which does not keep its events.
 *  - 410 in `retry.retryStatusCodes` with `retry.disableOnGone`, which wins:
 *    a 410 suspends the webhook rather than being retried.
 */
export function configWarnings(config: Config): string[] {
  const allowPrivate = config.assetUpdater.network.allowPrivateAddresses;
  const warnings: string[] = [];
  const { retryStatusCodes, disableOnGone } = config.assetUpdater.retry;
  if (disableOnGone && retryStatusCodes.includes(410)) {
    warnings.push(
      `assetUpdater.retry.retryStatusCodes[${retryStatusCodes.indexOf(410)}]: warning: 410 is not retried, since ` +
        'retry.disableOnGone is true, which wins: a 410 suspends its webhook until `asset-webhooks resume --webhook ID` or a new url',
    );
  }
  config.assetUpdater.webhooks.forEach((webhook, index) => {
    if (webhook.idFromUrl) {
      warnings.push(
        `assetUpdater.webhooks[${index}].id: warning: not set, so the id ${webhook.id} is derived from the url; ` +
          'if the url changes, the webhook gets another id and the payloads still waiting for this one are dead-lettered as webhook_removed ' +
          `(send them on with \`asset-webhooks dead-letters redeliver PAYLOAD_ID --to NEW_ID\`); set id: ${webhook.id} to keep the id through a url change`,
      );
    }
    if (!webhook.enabled && webhook.paused) {
      warnings.push(
        `assetUpdater.webhooks[${index}].paused: warning: enabled is false, which wins: events of this time are not ` +
          'delivered later and waiting payloads expire; for a pause that keeps them, set enabled: true',
      );
    }
    const host = new URL(webhook.url).hostname.replace(/^\[(.*)\]$/, '$1');
    const address = /^localhost\.?$/i.test(host) ? '127.0.0.1' : host;
    const reason = refusal(address, allowPrivate);
    if (reason === null || reason === 'not an IP address') return;
    const unless =
      reason === METADATA_REFUSAL
        ? 'whatever network.allowPrivateAddresses says'
        : 'unless network.allowPrivateAddresses is true';
    // ipaddr.js range names, in words.
    const words: Record<string, string> = {
      linkLocal: 'link-local',
      carrierGradeNat: 'carrier-grade NAT',
      uniqueLocal: 'unique-local',
      rfc6052: 'local-use NAT64',
    };
    const range = words[reason] ?? reason;
    const noun = range.endsWith(' address') ? range : `${range} address`;
    const article = /^[aeiou]/.test(noun) ? 'an' : 'a';
    warnings.push(
      `assetUpdater.webhooks[${index}].url: warning: ${host} is ${article} ${noun}; every delivery to it is refused ${unless}`,
    );
  });
  return warnings;
}
