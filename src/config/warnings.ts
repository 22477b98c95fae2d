import { METADATA_REFUSAL, refusal } from '../net/addresses.js';
import type { Config } from './schema.js';

/**
 * What a valid document still gets wrong for sure: a webhook whose URL names
 * an address the delivery guard always refuses (an IP address, or
 * `localhost`), so every delivery to it would end `address_refused` and in the
 * dead-letter store (host names are resolved at delivery time and are not
 * judged here); `paused` on a disabled webhook, which does not keep its events.
 * One line per finding, `<path>: warning: ...`.
 */
export function configWarnings(config: Config): string[] {
  const allowPrivate = config.assetUpdater.network.allowPrivateAddresses;
  const warnings: string[] = [];
  config.assetUpdater.webhooks.forEach((webhook, index) => {
    if (!webhook.enabled && webhook.paused) {
      warnings.push(`assetUpdater.webhooks[${index}].paused: warning: enabled is false, which wins: events of this time are not ` +
        'delivered later and waiting payloads expire; for a pause that keeps them, set enabled: true');
    }
    const host = new URL(webhook.url).hostname.replace(/^\[(.*)\]$/, '$1');
    const address = /^localhost\.?$/i.test(host) ? '127.0.0.1' : host;
    const reason = refusal(address, allowPrivate);
    if (reason === null || reason === 'not an IP address') return;
    const unless = reason === METADATA_REFUSAL ? 'whatever network.allowPrivateAddresses says' : 'unless network.allowPrivateAddresses is true';
    // ipaddr.js range names, in words.
    const words: Record<string, string> = { linkLocal: 'link-local', carrierGradeNat: 'carrier-grade NAT', uniqueLocal: 'unique-local', rfc6052: 'local-use NAT64' };
    const range = words[reason] ?? reason;
    const noun = range.endsWith(' address') ? range : `${range} address`;
    const article = /^[aeiou]/.test(noun) ? 'an' : 'a';
    warnings.push(`assetUpdater.webhooks[${index}].url: warning: ${host} is ${article} ${noun}; every delivery to it is refused ${unless}`);
  });
  return warnings;
}
