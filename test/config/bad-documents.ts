/** Bad configuration documents and the exact problem line each must produce. */

/** A document with one webhook; `webhookFields` are added to it, `top` lines to assetUpdater. */
export const valid = (webhookFields: string, top = ''): string =>
  `assetUpdater:\n${top}  webhooks:\n    - { url: "https://receiver.example/a", enabled: true${webhookFields ? `, ${webhookFields}` : ''} }\n`;

export const twoWebhooks = (first: string, second: string): string =>
  `assetUpdater:\n  webhooks:\n    - ${first}\n    - ${second}\n`;

/**
 * Every kind of bad document: [what is wrong, document, the problem line
 * (or its beginning) that must be reported]. schema.test.ts checks all of them
 * through parseConfigText; check-config.test.ts runs one of each class
 * through the real command line.
 */
export const badDocuments: readonly (readonly [string, string, string])[] = [
  // missing and mistyped keys
  // mirror webhooks (CONTRACT section 7, Mirror)
  [
    'a mirror webhook without Deleted and Purged',
    valid('mirror: true, eventTypes: [Created, Edited, Reversion]'),
    'assetUpdater.webhooks[0].eventTypes: expected the event types of a mirror webhook to include Created, Edited, Deleted and Purged (missing: Deleted, Purged), got a list ["Created","Edited","Reversion"]',
  ],
  [
    'Unmatched on a webhook without mirror',
    valid('eventTypes: [Created, Unmatched]'),
    'assetUpdater.webhooks[0].eventTypes: expected Unmatched only on a webhook with mirror: true (only mirror webhooks receive it), got "Unmatched"',
  ],
  [
    'mirror written as a string',
    valid('mirror: "yes"'),
    'assetUpdater.webhooks[0].mirror: expected true or false, got "yes"',
  ],
  [
    'a missing enabled',
    'assetUpdater:\n  webhooks:\n    - { url: "https://receiver.example/a" }\n',
    'assetUpdater.webhooks[0].enabled: expected true or false, got nothing',
  ],
  [
    'a missing url',
    'assetUpdater:\n  webhooks:\n    - { enabled: true }\n',
    'assetUpdater.webhooks[0].url: expected an http or https URL, got nothing',
  ],
  [
    'a missing webhooks list',
    'assetUpdater:\n  intervalSeconds: 5\n',
    'assetUpdater.webhooks: expected a list of webhooks, got nothing',
  ],
  [
    'enabled written as a string',
    valid('', '').replace('enabled: true', 'enabled: "yes"'),
    'assetUpdater.webhooks[0].enabled: expected true or false, got "yes"',
  ],
  [
    'a mistyped number',
    valid('batchSize: "ten"'),
    'assetUpdater.webhooks[0].batchSize: expected an integer from 1 to 100, got "ten"',
  ],
  [
    'a filter value written as a number',
    valid('filters: [ { filterKind: additionalFields, condition: ANY, value: [2026] } ]'),
    'assetUpdater.webhooks[0].filters[0].value[0]: expected a string (quote numbers: "2026"), got 2026',
  ],
  [
    'headers that are not a mapping',
    valid('headers: [X-Tenant]'),
    'assetUpdater.webhooks[0].headers: expected a mapping of header names to string values, got a list ["X-Tenant"]',
  ],
  [
    'an empty resource type',
    valid('resourceTypes: [""]'),
    'assetUpdater.webhooks[0].resourceTypes[0]: expected a non-empty string, got ""',
  ],
  [
    'a key YAML reads as null',
    'assetUpdater:\n  webhooks:\n    - url: "https://receiver.example/a"\n      enabled: true\n      null: 5\n',
    'assetUpdater.webhooks[0]: expected key names, got null, which YAML reads as no name (write "null" to use the word as a key)',
  ],
  [
    'a key written as ~',
    'assetUpdater:\n  ~: 1\n  webhooks: []\n',
    'assetUpdater: expected key names, got ~, which YAML reads as no name (write "~" to use the word as a key)',
  ],
  [
    'a key with no name',
    'assetUpdater:\n  webhooks: []\n  : 1\n',
    'assetUpdater: expected key names, got a key with no name before its colon',
  ],
  [
    'a root key YAML reads as null',
    '~: 1\n',
    'config.yaml: expected key names, got ~, which YAML reads as no name (write "~" to use the word as a key)',
  ],
  // urls
  [
    'a url that is not http(s)',
    'assetUpdater:\n  webhooks:\n    - { url: "ftp://x.example/", enabled: true }\n',
    'assetUpdater.webhooks[0].url: expected an http or https URL, got "ftp://x.example/"',
  ],
  [
    'a url without a host',
    'assetUpdater:\n  webhooks:\n    - { url: "https://", enabled: true }\n',
    'assetUpdater.webhooks[0].url: expected an http or https URL, got "https://"',
  ],
  [
    'a url with user and password',
    valid('').replace('https://receiver.example/a', 'https://user:s3cret@receiver.example/a'),
    'assetUpdater.webhooks[0].url: expected a url without user or password, which are never sent (set an Authorization header in the webhook\'s headers instead), got "https://user:***@receiver.example/a"',
  ],
  [
    'a url with a user only',
    valid('').replace('https://receiver.example/a', 'https://user@receiver.example/a'),
    'assetUpdater.webhooks[0].url: expected a url without user or password, which are never sent (set an Authorization header in the webhook\'s headers instead), got "https://user@receiver.example/a"',
  ],
  [
    'a url with CR and LF',
    valid('').replace('https://receiver.example/a', 'https://receiver.example/a\\r\\nb'),
    'assetUpdater.webhooks[0].url: expected a url without spaces, control characters (CR, LF, tab) or backslashes, which URL parsing would drop or rewrite (percent-encode them: %20, %0D, %0A, %09, %5C), got "\\r" at position 27 of "https://receiver.example/a\\r\\nb"',
  ],
  [
    'a url with a tab',
    valid('').replace('https://receiver.example/a', 'https://receiver.exa\\tmple/a'),
    'assetUpdater.webhooks[0].url: expected a url without spaces, control characters (CR, LF, tab) or backslashes, which URL parsing would drop or rewrite (percent-encode them: %20, %0D, %0A, %09, %5C), got "\\t" at position 21',
  ],
  [
    'a url with a trailing space',
    valid('').replace('https://receiver.example/a', 'https://receiver.example/a '),
    'assetUpdater.webhooks[0].url: expected a url without spaces, control characters (CR, LF, tab) or backslashes, which URL parsing would drop or rewrite (percent-encode them: %20, %0D, %0A, %09, %5C), got " " at position 27',
  ],
  [
    'a url with a backslash',
    valid('').replace('https://receiver.example/a', 'https://receiver.example\\\\a'),
    'assetUpdater.webhooks[0].url: expected a url without spaces, control characters (CR, LF, tab) or backslashes, which URL parsing would drop or rewrite (percent-encode them: %20, %0D, %0A, %09, %5C), got "\\\\" at position 25',
  ],
  [
    'a url with a password and a line break, masked',
    valid('').replace('https://receiver.example/a', 'https://u:s3cret@receiver.example/a\\n'),
    'got "\\n" at position 36 of "https://u:***@receiver.example/a\\n"',
  ],
  [
    'a url longer than the limit',
    valid('').replace('https://receiver.example/a', `https://receiver.example/${'a'.repeat(8192)}`),
    'assetUpdater.webhooks[0].url: expected a url of at most 8192 characters, got a url of 8217 characters',
  ],
  [
    'an aws endpoint with a password',
    valid('', '  secrets: { provider: aws, aws: { region: eu-west-1, endpoint: "http://k:s3cret@aws.example/" } }\n'),
    'assetUpdater.secrets.aws.endpoint: expected a url without user or password, which are not used (the AWS SDK takes its credentials from its default chain: the environment, a profile or a role), got "http://k:***@aws.example/"',
  ],
  [
    'an aws endpoint that is not a url',
    valid('', '  secrets: { provider: aws, aws: { region: eu-west-1, endpoint: localhost } }\n'),
    'assetUpdater.secrets.aws.endpoint: expected an http or https URL, got "localhost"',
  ],
  // enums
  [
    'an unknown filterKind',
    valid('filters: [ { filterKind: colour, condition: ANY, value: [red] } ]'),
    'assetUpdater.webhooks[0].filters[0].filterKind: expected one of keywords, additionalFields, state, schemaId, typeId, domainId, parentId, got "colour"',
  ],
  [
    'an unknown condition',
    twoWebhooks(
      '{ id: a, url: "https://a.example/", enabled: true }',
      '{ id: b, url: "https://b.example/", enabled: true, filters: [ { filterKind: keywords, condition: OR, value: [a] } ] }',
    ),
    'assetUpdater.webhooks[1].filters[0].condition: expected one of AND, ANY, NONE, got "OR"',
  ],
  [
    'a condition in lower case',
    valid('filters: [ { filterKind: keywords, condition: any, value: [a] } ]'),
    'assetUpdater.webhooks[0].filters[0].condition: expected one of AND, ANY, NONE, got "any"',
  ],
  [
    'an unknown event type',
    valid('eventTypes: [Created, Renamed]'),
    'assetUpdater.webhooks[0].eventTypes[1]: expected one of Created, Edited, Deleted, Purged, Reversion, Unmatched (any case), got "Renamed"',
  ],
  [
    'an empty event type list',
    valid('eventTypes: []'),
    'assetUpdater.webhooks[0].eventTypes: expected at least one event type, got an empty list',
  ],
  [
    'an unknown secrets provider',
    valid('', '  secrets: { provider: vault }\n'),
    'assetUpdater.secrets.provider: expected one of env, file, gcp, aws, got "vault"',
  ],
  // filter groups
  [
    'an empty value list',
    valid('filters: [ { filterKind: keywords, condition: ANY, value: [] } ]'),
    'assetUpdater.webhooks[0].filters[0].value: expected at least one value, got an empty list',
  ],
  [
    'fieldName on a filter that is not additionalFields',
    valid('filters: [ { filterKind: keywords, fieldName: x, condition: ANY, value: [a] } ]'),
    'assetUpdater.webhooks[0].filters[0].fieldName: expected no fieldName on a keywords filter (only additionalFields takes one), got "x"',
  ],
  [
    'a schemaId value that is not digits',
    valid('filters: [ { filterKind: schemaId, condition: ANY, value: ["12", "abc"] } ]'),
    'assetUpdater.webhooks[0].filters[0].value[1]: expected a string of digits without leading zeros, got "abc"',
  ],
  [
    'a typeId value with a sign',
    valid('filters: [ { filterKind: typeId, condition: ANY, value: ["-1"] } ]'),
    'assetUpdater.webhooks[0].filters[0].value[0]: expected a string of digits without leading zeros, got "-1"',
  ],
  [
    'a domainId of "null" (only parentId takes it)',
    valid('filters: [ { filterKind: domainId, condition: ANY, value: ["null"] } ]'),
    'assetUpdater.webhooks[0].filters[0].value[0]: expected a string of digits without leading zeros, got "null"',
  ],
  [
    'a parentId that is neither digits nor null',
    valid('filters: [ { filterKind: parentId, condition: ANY, value: [none] } ]'),
    'assetUpdater.webhooks[0].filters[0].value[0]: expected a string of digits without leading zeros or "null", got "none"',
  ],
  [
    "a schemaId value with a leading zero (never equal to the asset's decimal value)",
    valid('filters: [ { filterKind: schemaId, condition: ANY, value: ["007"] } ]'),
    'assetUpdater.webhooks[0].filters[0].value[0]: expected a string of digits without leading zeros, got "007"',
  ],
  // ranges
  [
    'intervalSeconds below 1',
    valid('', '  intervalSeconds: 0\n'),
    'assetUpdater.intervalSeconds: expected an integer from 1 to 3600, got 0',
  ],
  [
    'intervalSeconds above 3600',
    valid('', '  intervalSeconds: 3601\n'),
    'assetUpdater.intervalSeconds: expected an integer from 1 to 3600, got 3601',
  ],
  [
    'a fractional interval',
    valid('', '  intervalSeconds: 1.5\n'),
    'assetUpdater.intervalSeconds: expected an integer from 1 to 3600, got 1.5',
  ],
  [
    'maxPayloadBytes below 1024',
    valid('', '  maxPayloadBytes: 1023\n'),
    'assetUpdater.maxPayloadBytes: expected an integer from 1024 to 16777216, got 1023',
  ],
  [
    'maxPayloadBytes above 16 MB',
    valid('', '  maxPayloadBytes: 16777217\n'),
    'assetUpdater.maxPayloadBytes: expected an integer from 1024 to 16777216, got 16777217',
  ],
  [
    'requestTimeoutSeconds above 300',
    valid('', '  requestTimeoutSeconds: 301\n'),
    'assetUpdater.requestTimeoutSeconds: expected an integer from 1 to 300, got 301',
  ],
  [
    'retentionDays above 365',
    valid('', '  retentionDays: 366\n'),
    'assetUpdater.retentionDays: expected an integer from 1 to 365, got 366',
  ],
  [
    'a retry delay of 0',
    valid('', '  retry: { delaysSeconds: [60, 0] }\n'),
    'assetUpdater.retry.delaysSeconds[1]: expected an integer from 1 to 86400, got 0',
  ],
  [
    'more than 10 retries',
    valid('', '  retry: { delaysSeconds: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1] }\n'),
    'assetUpdater.retry.delaysSeconds: expected at most 10 retries, got a list [1,1,1,1,1,1,1,1,1,1,1]',
  ],
  [
    'batchSize above 100',
    valid('batchSize: 101'),
    'assetUpdater.webhooks[0].batchSize: expected an integer from 1 to 100, got 101',
  ],
  [
    'concurrency of 0',
    valid('concurrency: 0'),
    'assetUpdater.webhooks[0].concurrency: expected an integer from 1 to 64, got 0',
  ],
  // ids
  [
    'an id with a space',
    valid('id: "my hook"'),
    'assetUpdater.webhooks[0].id: expected an id of 1 to 64 characters A-Z a-z 0-9 _ . -, got "my hook"',
  ],
  [
    'a duplicate id',
    twoWebhooks(
      '{ id: crm, url: "https://a.example/", enabled: true }',
      '{ id: crm, url: "https://b.example/", enabled: true }',
    ),
    'assetUpdater.webhooks[1].id: expected a unique webhook id (webhooks[0] has the same), got "crm"',
  ],
  [
    'two default ids that collide',
    twoWebhooks('{ url: "https://a.example/", enabled: true }', '{ url: "https://a.example/", enabled: false }'),
    'assetUpdater.webhooks[1].id: expected a unique webhook id (webhooks[0] has the same; this one is derived from the url, set an id), got "webhook-',
  ],
  [
    "a given id that equals another's default id",
    twoWebhooks(
      '{ url: "https://receiver.example/a", enabled: true }',
      '{ id: webhook-50155c38a274, url: "https://b.example/", enabled: true }',
    ),
    'assetUpdater.webhooks[1].id: expected a unique webhook id (webhooks[0] has the same), got "webhook-50155c38a274"',
  ],
  // headers
  [
    'a header that overrides Content-Type',
    valid('headers: { content-type: text/plain }'),
    'assetUpdater.webhooks[0].headers["content-type"]: expected a header other than Content-Type, X-API-Key, Host or Content-Length (the service sets those), got "content-type"',
  ],
  [
    'a header that overrides X-API-Key',
    valid('headers: { X-API-Key: k }'),
    'assetUpdater.webhooks[0].headers["X-API-Key"]: expected a header other than Content-Type, X-API-Key, Host or Content-Length',
  ],
  [
    'a header that overrides Host (any case)',
    valid('headers: { HOST: evil.example }'),
    'assetUpdater.webhooks[0].headers.HOST: expected a header other than Content-Type, X-API-Key, Host or Content-Length',
  ],
  [
    'a header that overrides Content-Length',
    valid('headers: { Content-Length: "0" }'),
    'assetUpdater.webhooks[0].headers["Content-Length"]: expected a header other than Content-Type, X-API-Key, Host or Content-Length',
  ],
  [
    'a header name that is not an HTTP token',
    valid('headers: { "X Tenant": acme }'),
    'assetUpdater.webhooks[0].headers["X Tenant"]: expected a header name made of HTTP token characters, got "X Tenant"',
  ],
  [
    'a header value with CR or LF',
    valid('headers: { X-Tenant: "a\\r\\nInjected: 1" }'),
    'assetUpdater.webhooks[0].headers["X-Tenant"]: expected a header value without CR, LF, NUL or other control characters, nor characters beyond U+00FF, got a value with "\\r" at position 2 (the value is not shown: it may be secret)',
  ],
  [
    'a header value with NUL',
    valid('headers: { X-Tenant: "a\\0b" }'),
    'assetUpdater.webhooks[0].headers["X-Tenant"]: expected a header value without CR, LF, NUL or other control characters, nor characters beyond U+00FF, got a value with "\\u0000" at position 2 (the value is not shown: it may be secret)',
  ],
  [
    'a header value with another control character',
    valid('headers: { X-Tenant: "a\\x01b" }'),
    'assetUpdater.webhooks[0].headers["X-Tenant"]: expected a header value without CR, LF, NUL or other control characters, nor characters beyond U+00FF, got a value with "\\u0001" at position 2 (the value is not shown: it may be secret)',
  ],
  [
    'a header value beyond Latin-1',
    valid('headers: { X-Tenant: "na\u00efve \u2603" }'),
    'assetUpdater.webhooks[0].headers["X-Tenant"]: expected a header value without CR, LF, NUL or other control characters, nor characters beyond U+00FF, got a value with "\u2603" at position 7 (the value is not shown: it may be secret)',
  ],
  [
    'a header the HTTP client manages',
    valid('headers: { Transfer-Encoding: chunked }'),
    'assetUpdater.webhooks[0].headers["Transfer-Encoding"]: expected a header other than Connection, Keep-Alive, Transfer-Encoding, Upgrade or Expect (the HTTP client manages those), got "Transfer-Encoding"',
  ],
  [
    'the same header twice in another case',
    valid('headers: { X-Tenant: a, x-tenant: b }'),
    'assetUpdater.webhooks[0].headers["x-tenant"]: expected each header once (header names ignore case: "X-Tenant" is the same header), got "x-tenant"',
  ],
  [
    'a header longer than the limit',
    valid(`headers: { X-Tenant: "${'a'.repeat(8200)}" }`),
    'assetUpdater.webhooks[0].headers["X-Tenant"]: expected a header of at most 8192 bytes, name and value, got 8208 bytes (the value is not shown: it may be secret)',
  ],
  [
    'headers longer than the limit in all',
    valid(`headers: { ${Array.from({ length: 3 }, (_, i) => `X-${i}: "${'a'.repeat(6000)}"`).join(', ')} }`),
    'assetUpdater.webhooks[0].headers: expected at most 16384 bytes of headers in all, names and values, got 18009 bytes in 3 headers',
  ],
  [
    'a header value that is a number',
    valid('headers: { X-Tenant: 5 }'),
    'assetUpdater.webhooks[0].headers["X-Tenant"]: expected a string header value, got 5',
  ],
  // secrets provider settings
  [
    'provider file without a directory',
    valid('', '  secrets: { provider: file }\n'),
    'assetUpdater.secrets.directory: expected a directory for secrets provider file, got nothing',
  ],
  [
    'provider gcp without a projectId',
    valid('', '  secrets: { provider: gcp }\n'),
    'assetUpdater.secrets.gcp.projectId: expected a projectId for secrets provider gcp, got nothing',
  ],
  [
    'provider gcp with an empty gcp block',
    valid('', '  secrets: { provider: gcp, gcp: {} }\n'),
    'assetUpdater.secrets.gcp.projectId: expected a non-empty string, got nothing',
  ],
  [
    'provider file with an apikey that is a path',
    valid('apikey: ../outside.txt', '  secrets: { provider: file, directory: /run/secrets }\n'),
    'assetUpdater.webhooks[0].apikey: expected a file name without path separators, NUL, "." or ".." (secrets provider file), got "../outside.txt"',
  ],
  [
    'provider file with a signing secret that is a path',
    valid('signing: { secret: keys/crm }', '  secrets: { provider: file, directory: /run/secrets }\n'),
    'assetUpdater.webhooks[0].signing.secret: expected a file name without path separators, NUL, "." or ".." (secrets provider file), got "keys/crm"',
  ],
  // signing
  [
    'signing without a secret',
    valid('signing: {}'),
    'assetUpdater.webhooks[0].signing.secret: expected a non-empty string, got nothing',
  ],
  [
    'signing given as the secret name itself',
    valid('signing: crm-signing'),
    'assetUpdater.webhooks[0].signing: expected a mapping with the key secret, got "crm-signing"',
  ],
  [
    'a header that signing sets',
    valid('headers: { Webhook-Signature: v1,abc }'),
    'assetUpdater.webhooks[0].headers["Webhook-Signature"]: expected a header other than webhook-id, webhook-timestamp or webhook-signature (signing sets those: see signing.secret), got "Webhook-Signature"',
  ],
  [
    'provider aws without a region',
    valid('', '  secrets: { provider: aws }\n'),
    'assetUpdater.secrets.aws.region: expected a region for secrets provider aws, got nothing',
  ],
  // unknown keys
  [
    'a misspelt key that would otherwise mean "all types"',
    valid('eventType: [Created]'),
    'assetUpdater.webhooks[0].eventType: expected no such key (check the spelling), got unknown key "eventType"',
  ],
  [
    'an unknown key in a filter group',
    valid('filters: [ { filterKind: keywords, condition: ANY, value: [a], values: [b] } ]'),
    'assetUpdater.webhooks[0].filters[0].values: expected no such key (check the spelling), got unknown key "values"',
  ],
  [
    'an unknown key in signing',
    valid('signing: { secret: crm, algorithm: sha512 }'),
    'assetUpdater.webhooks[0].signing.algorithm: expected no such key (check the spelling), got unknown key "algorithm"',
  ],
  [
    'an unknown key in secrets',
    valid('', '  secrets: { provider: env, cache: 5 }\n'),
    'assetUpdater.secrets.cache: expected no such key (check the spelling), got unknown key "cache"',
  ],
  [
    'an unknown key under assetUpdater',
    valid('', '  interval: 60\n'),
    'assetUpdater.interval: expected no such key (check the spelling), got unknown key "interval"',
  ],
  [
    'a misspelt root key',
    'assetUpdatr:\n  webhooks: []\n',
    'assetUpdatr: expected the root key "assetUpdater", got unknown key "assetUpdatr"',
  ],
  // the document itself
  ['an empty document', '', ': expected a document with the root key "assetUpdater", got an empty document'],
  [
    'a document of comments only',
    '# nothing yet\n',
    ': expected a document with the root key "assetUpdater", got an empty document',
  ],
  [
    'a document that is a plain string',
    'hello\n',
    ': expected a mapping with the root key "assetUpdater", got a text of 5 characters (not shown)',
  ],
  [
    'a YAML syntax error, with line and column',
    'assetUpdater:\n  webhooks: [\n',
    '.yaml:3:1: expected valid YAML or JSON, got',
  ],
  [
    'a key given twice',
    'assetUpdater:\n  webhooks: []\n  webhooks: []\n',
    'config.yaml:3:3: expected each key once in a mapping, got "webhooks" a second time',
  ],
  [
    'two YAML documents in one file',
    'assetUpdater:\n  webhooks: []\n---\nother: 1\n',
    '.yaml:3:1: expected a single YAML or JSON document, got a second one',
  ],
  ['a JSON syntax error', '{ "assetUpdater": { "webhooks": [ } }', '.yaml:1:'],
  // network.proxy
  [
    'a proxy url with credentials',
    valid('', '  network: { proxy: "http://user:hunter2@proxy.internal:3128" }\n'),
    'assetUpdater.network.proxy: expected a proxy url without user or password',
  ],
  [
    'a proxy url that is not http://',
    valid('', '  network: { proxy: "socks5://proxy.internal:1080" }\n'),
    'assetUpdater.network.proxy: expected an http:// URL of a proxy',
  ],
  [
    'a proxy url with a path',
    valid('', '  network: { proxy: "http://proxy.internal:3128/x" }\n'),
    'assetUpdater.network.proxy: expected a proxy url of a scheme, host and port only',
  ],
  [
    'collections nested deeper than the limit',
    `assetUpdater: ${'['.repeat(100)}${']'.repeat(100)}\n`,
    'config.yaml:1:77: expected collections nested at most 64 deep, got deeper',
  ],
  [
    'block sequences nested deeper than the limit',
    `assetUpdater:\n${'- '.repeat(100)}x\n`,
    'config.yaml:2:127: expected collections nested at most 64 deep, got deeper',
  ],
  [
    'more values than the limit',
    `assetUpdater: [${'1,'.repeat(100_001)}1]\n`,
    'config.yaml:1:200013: expected a document of at most 200000 values, keys, indicators and separators, got more',
  ],
  [
    'more empty entries than the limit (each a parse error)',
    `assetUpdater: [${','.repeat(200_001)}]\n`,
    'config.yaml:1:200013: expected a document of at most 200000 values, keys, indicators and separators, got more',
  ],
  [
    'more lines than the limit',
    `${'# nothing\n'.repeat(200_001)}assetUpdater: { webhooks: [] }\n`,
    'config.yaml:200001:1: expected a document of at most 200000 lines, got more',
  ],
  // found values are quoted as a short escaped prefix, whatever the file holds
  [
    'a file of another format (a shadow password file)',
    'root:$6$Zr3aQw1b$abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ:19000:0:99999:7:::\n',
    '["root:$6$Zr3aQw1b$abcdefghijklmnopqrstuvw"...]: expected the root key "assetUpdater", got unknown key "root:$6$Zr3aQw1b$abcdefghijklmnopqrstuvw"...',
  ],
  [
    'a long unknown key with a terminal escape',
    `assetUpdater:\n  "\\e[31m${'k'.repeat(100)}": 1\n  webhooks: []\n`,
    'assetUpdater["\\u001b[31mkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"...]: expected no such key (check the spelling), got unknown key "\\u001b[31mkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"...',
  ],
  // strings PostgreSQL cannot store
  [
    'a NUL in a filter value',
    valid('filters: [ { filterKind: keywords, condition: ANY, value: ["a\\u0000b"] } ]'),
    'assetUpdater.webhooks[0].filters[0].value[0]: expected text without NUL characters or unpaired UTF-16 surrogates, which PostgreSQL cannot store, got a NUL character at position 2 of "a\\u0000b"',
  ],
  [
    'a NUL in a fieldName',
    valid('filters: [ { filterKind: additionalFields, fieldName: "f\\0", condition: ANY, value: [a] } ]'),
    'assetUpdater.webhooks[0].filters[0].fieldName: expected text without NUL characters or unpaired UTF-16 surrogates, which PostgreSQL cannot store, got a NUL character at position 2 of "f\\u0000"',
  ],
  [
    'an unpaired surrogate in a filter value (JSON)',
    '{"assetUpdater": {"webhooks": [{"url": "https://a.example/", "enabled": true, "filters": [{"filterKind": "state", "condition": "ANY", "value": ["\\ud800"]}]}]}}',
    'assetUpdater.webhooks[0].filters[0].value[0]: expected text without NUL characters or unpaired UTF-16 surrogates, which PostgreSQL cannot store, got an unpaired surrogate at position 1 of "\\ud800"',
  ],
  [
    'an unpaired surrogate in a url',
    'assetUpdater:\n  webhooks:\n    - { url: "https://a.example/\\udc00", enabled: true }\n',
    'assetUpdater.webhooks[0].url: expected text without NUL characters or unpaired UTF-16 surrogates, which PostgreSQL cannot store, got an unpaired surrogate at position 19 of "https://a.example/\\udc00"',
  ],
  [
    'a NUL in a resource type',
    valid('resourceTypes: ["Resource\\0"]'),
    'assetUpdater.webhooks[0].resourceTypes[0]: expected text without NUL characters or unpaired UTF-16 surrogates, which PostgreSQL cannot store, got a NUL character at position 9 of "Resource\\u0000"',
  ],
  [
    'a NUL in an apikey name',
    valid('apikey: "crm\\0"'),
    'assetUpdater.webhooks[0].apikey: expected text without NUL characters or unpaired UTF-16 surrogates, which PostgreSQL cannot store, got a NUL character at position 4 of "crm\\u0000"',
  ],
  [
    'a NUL in a signing secret name',
    valid('signing: { secret: "\\0" }'),
    'assetUpdater.webhooks[0].signing.secret: expected text without NUL characters or unpaired UTF-16 surrogates, which PostgreSQL cannot store, got a NUL character at position 1 of "\\u0000"',
  ],
  [
    'a NUL in a secrets setting',
    valid('', '  secrets: { provider: gcp, gcp: { projectId: "p\\0" } }\n'),
    'assetUpdater.secrets.gcp.projectId: expected text without NUL characters or unpaired UTF-16 surrogates, which PostgreSQL cannot store, got a NUL character at position 2 of "p\\u0000"',
  ],
  [
    'a NUL in an event type',
    valid('eventTypes: ["Created\\0"]'),
    'assetUpdater.webhooks[0].eventTypes[0]: expected one of Created, Edited, Deleted, Purged, Reversion, Unmatched (any case), got "Created\\u0000"',
  ],
  [
    'a NUL in a header value',
    valid('headers: { X-Tenant: "a\\0" }'),
    'assetUpdater.webhooks[0].headers["X-Tenant"]: expected a header value without CR, LF, NUL',
  ],
];
