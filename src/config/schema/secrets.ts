import { z } from 'zod';
import { isSecretFileName, SECRET_FILE_NAME_EXPECTED } from '../../secrets/file-provider.js';
import { intRange, nonEmptyString } from './primitives.js';
import { endpointUrl } from './urls.js';

export const SECRET_PROVIDERS = ['env', 'file', 'gcp', 'aws'] as const;

/** `secrets`: where `apikey` and `signing.secret` names are resolved (docs/configuration.md, secrets providers). */
export const secrets = z
  .strictObject({
    /** The secret manager that resolves names. */
    provider: z.enum(SECRET_PROVIDERS, { error: `expected one of ${SECRET_PROVIDERS.join(', ')}` }).default('env'),
    /** How long a resolved value is reused. */
    cacheSeconds: intRange(0, 86_400).default(300),
    /** provider file: the directory holding one file per secret. */
    directory: nonEmptyString.optional(),
    /** provider gcp: the project of secret ids; apiEndpoint for a private endpoint. */
    gcp: z.strictObject({ projectId: nonEmptyString, apiEndpoint: nonEmptyString.optional() }).optional(),
    /** provider aws: the region; endpoint to override the service URL. */
    aws: z.strictObject({ region: nonEmptyString, endpoint: endpointUrl.optional() }).optional(),
  })
  .superRefine((value, context) => {
    if (value.provider === 'file' && value.directory === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['directory'],
        input: undefined,
        message: 'expected a directory for secrets provider file',
      });
    }
    if (value.provider === 'gcp' && value.gcp === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['gcp', 'projectId'],
        input: undefined,
        message: 'expected a projectId for secrets provider gcp',
      });
    }
    if (value.provider === 'aws' && value.aws === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['aws', 'region'],
        input: undefined,
        message: 'expected a region for secrets provider aws',
      });
    }
  });

/**
 * With provider file an apikey or signing.secret names a file in the
 * directory: one that could never be read is refused now rather than at every
 * delivery. A refinement of the whole settings object, run even when other
 * keys are invalid, so the settings and their entries are read as unknown.
 */
export function refuseUnreadableSecretFileNames(settings: unknown, context: z.core.$RefinementCtx<unknown>): void {
  const { secrets: given, webhooks: entries } = settings as { secrets?: { provider?: unknown }; webhooks?: unknown };
  if (given?.provider !== 'file' || !Array.isArray(entries)) return;
  entries.forEach((entry: unknown, index) => {
    if (entry === null || typeof entry !== 'object') return;
    const { apikey, signing } = entry as { apikey?: unknown; signing?: unknown };
    const signingSecret =
      signing !== null && typeof signing === 'object' ? (signing as { secret?: unknown }).secret : undefined;
    const names: Array<[unknown, (string | number)[]]> = [
      [apikey, ['apikey']],
      [signingSecret, ['signing', 'secret']],
    ];
    for (const [name, path] of names) {
      if (typeof name === 'string' && name !== '' && !isSecretFileName(name)) {
        context.addIssue({
          code: 'custom',
          path: ['webhooks', index, ...path],
          input: name,
          message: `${SECRET_FILE_NAME_EXPECTED} (secrets provider file)`,
        });
      }
    }
  });
}
