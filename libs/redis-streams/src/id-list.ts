/** How many ids a log line names before "and N more". */
export const IDS_NAMED = 3;

/** `1-1, 1-2, 1-3 and 47 more`: a log line names a few ids, never a whole batch. */
export function someIds(ids: readonly string[], named = IDS_NAMED): string {
  if (ids.length <= named) return ids.join(', ');
  return `${ids.slice(0, named).join(', ')} and ${ids.length - named} more`;
}
