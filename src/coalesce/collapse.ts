/**
 * Collapsing: within one coalescing run all EDITED events
 * of one asset become one, carrying the eventId and eventTimestamp of the latest
 * edit. Other event types are never merged.
 *
 * The claim query reports for every EDITED row the eventId of the latest EDITED
 * row of the same asset in the run (which may lie in a later chunk). A row is
 * collapsed into that event unless it is that event.
 */
export function collapsedInto(row: {
  readonly eventType: string;
  readonly eventId: string;
  readonly latestEditId: string | null;
}): string | null {
  if (row.eventType !== 'EDITED' || row.latestEditId === null) return null;
  return row.latestEditId === row.eventId ? null : row.latestEditId;
}
