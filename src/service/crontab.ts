/**
 * graphile-worker's crontab: maintenance every minute, one job at a time.
 * Coalescing is scheduled by tick() (src/coalesce/schedule.ts), at the
 * configured interval; delivery runs in the delivery pump, outside
 * graphile-worker.
 */
export const MAINTENANCE_CRONTAB = '* * * * * maintenance ?max=1&jobKey=asset_webhooks_maintenance';
