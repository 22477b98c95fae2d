import { describe, expect, it } from 'vitest';
import { secretLikeness } from '../../src/text/secret-like.js';

describe('secretLikeness', () => {
  it.each([
    ['a GitHub token with its newline', 'ghp_R8sK2mQ9vX4tY7wZ1aB3cD5eF6gH8jK0lM2nP4\n', 'token'],
    ['a whsec_ key', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw5TnBRSQrZ6g=\n', 'whsec_'],
    ['two whsec_ keys of a rotation', 'whsec_MfKQ9r8GKYqrTwjU whsec_PD8ILPZIo2LaLaSw5Tn', 'whsec_'],
    ['a hex key', '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 'token'],
    ['a JWT', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk', 'token'],
    [
      'a PEM private key',
      '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n',
      'PEM',
    ],
    ['a certificate after a comment', '# ca\n-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----', 'PEM'],
  ])('takes %s for a secret', (_, text, kind) => {
    expect(secretLikeness(text)).toContain(kind);
  });

  it.each([
    ['a configuration document', 'assetUpdater:\n  webhooks: []\n'],
    ['a one-line JSON document', '{"assetUpdater": {"webhooks": []}}'],
    ['a word', 'configuration'],
    ['a short token', 'abc123'],
    ['SQL', 'create trigger t after insert on assets for each row execute function f();'],
    ['a document that names a secret', 'assetUpdater:\n  webhooks:\n    - apikey: crm-api-key\n'],
  ])('takes %s for no secret', (_, text) => {
    expect(secretLikeness(text)).toBeUndefined();
  });
});
