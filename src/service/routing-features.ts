import type { RoutingFeatureKind } from '../coalesce/routing-feature.js';
import { mirrorFeature } from '../mirror/route.js';

/**
 * The routing features every coalescing run of the service uses: coalescing
 * defines the extension point (RoutingFeatureKind) and imports none of them.
 * A feature whose webhooks are all plain has nothing to do in a run.
 */
export const ROUTING_FEATURES: readonly RoutingFeatureKind[] = [mirrorFeature];
