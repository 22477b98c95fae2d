import { describe } from 'vitest';
import { useSchemaTable, type Config } from './documents.js';

/** src/config/schema/network.ts: `assetUpdater.network`. */
const { refuses, reads } = useSchemaTable();
const network = (config: Config) => config.assetUpdater.network;
const at = 'assetUpdater.network';
const proxy = (value: unknown) => ({ settings: { network: { proxy: value } } });

describe('network: defaults', () => {
  reads([
    ['the section left out', {}, network, { allowPrivateAddresses: false }],
    ['an empty section', { settings: { network: {} } }, network, { allowPrivateAddresses: false }],
  ]);
});

describe('network.allowPrivateAddresses: a boolean', () => {
  reads([
    ['true', { settings: { network: { allowPrivateAddresses: true } } }, (c) => network(c).allowPrivateAddresses, true],
  ]);
  refuses([
    [
      '"true" (a string)',
      { settings: { network: { allowPrivateAddresses: 'true' } } },
      `${at}.allowPrivateAddresses: expected true or false, got "true"`,
    ],
  ]);
});

describe('network.proxy: http://host:port, no user, password or path', () => {
  reads([
    ['a host and port', proxy('http://proxy.internal:3128'), (c) => network(c).proxy, 'http://proxy.internal:3128'],
    [
      'a host, port and bare slash',
      proxy('http://proxy.internal:3128/'),
      (c) => network(c).proxy,
      'http://proxy.internal:3128/',
    ],
  ]);
  const expected = 'expected an http:// URL of a proxy, such as http://proxy.internal:3128';
  refuses([
    [
      'an https:// proxy',
      proxy('https://proxy.internal:3128'),
      `${at}.proxy: ${expected}, got "https://proxy.internal:3128"`,
    ],
    ['text that is no url', proxy('proxy.internal'), `${at}.proxy: ${expected}, got "proxy.internal"`],
    [
      'a space in the url',
      proxy('http://proxy .internal:3128'),
      `${at}.proxy: ${expected}, got "http://proxy .internal:3128"`,
    ],
    ['a number', proxy(3128), `${at}.proxy: expected an http:// URL of a proxy, got 3128`],
    [
      'a user and password, the password masked',
      proxy('http://user:hunter2@proxy.internal:3128'),
      `${at}.proxy: expected a proxy url without user or password (leave network.proxy unset and give HTTPS_PROXY from a secret instead), got "http://user:***@proxy.internal:3128"`,
    ],
    [
      'a path',
      proxy('http://proxy.internal:3128/path'),
      `${at}.proxy: expected a proxy url of a scheme, host and port only, got "http://proxy.internal:3128/path"`,
    ],
    [
      'a query',
      proxy('http://proxy.internal:3128?a=1'),
      `${at}.proxy: expected a proxy url of a scheme, host and port only, got "http://proxy.internal:3128?a=1"`,
    ],
  ]);
});

describe('network: its shape and unknown keys', () => {
  refuses([
    ['a string for the section', { settings: { network: 'open' } }, `${at}: expected a mapping, got "open"`],
    [
      'an unknown key (a typo)',
      { settings: { network: { allowPrivateAddress: true } } },
      `${at}.allowPrivateAddress: expected no such key (check the spelling), got unknown key "allowPrivateAddress"`,
    ],
  ]);
});
