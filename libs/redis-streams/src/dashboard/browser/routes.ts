/* Deep links: #/ (overview), #/stream/<key>[/<group>], #/entry/<key>/<id>, #/delayed/<key>/<id>, #/dead, #/dead/<key>, #/cluster,
 * each part URI-encoded. */
import { clusterPage } from './cluster-page.js';
import { deadListPage } from './dead-list-page.js';
import { deadPage } from './dead-page.js';
import type { Child } from './dom.js';
import { delayedEntryPage } from './delayed-entry-page.js';
import { entryPage } from './entry-page.js';
import { overviewPage } from './overview-page.js';
import { streamPage } from './stream-page.js';

/** The page the hash names: how to load it, whether it follows Redis (refreshes), and its item in the top nav. */
export interface View {
  load: () => Promise<Child[]>;
  live: boolean;
  nav: string;
}

export function view(): View {
  const parts = location.hash.replace(/^#\/?/, '').split('/');
  let decoded: string[];
  try {
    decoded = parts.map(decodeURIComponent);
  } catch {
    // A hand-typed link with a stray % is no page: the overview, not an exception.
    decoded = [''];
  }
  const [page, a, b] = decoded;
  if (page === 'stream' && a) return { load: () => streamPage(a, b || undefined), live: true, nav: 'overview' };
  // Its fields never change (read once, entry-page.ts); its state in each group is followed.
  if (page === 'entry' && a && b) return { load: () => entryPage(a, b), live: true, nav: 'overview' };
  if (page === 'delayed' && a && b) return { load: () => delayedEntryPage(a, b), live: true, nav: 'overview' };
  if (page === 'dead' && a) return { load: () => deadPage(a), live: true, nav: 'dead' };
  if (page === 'dead') return { load: () => deadListPage(), live: true, nav: 'dead' };
  if (page === 'cluster') return { load: () => clusterPage(), live: true, nav: 'cluster' };
  return { load: () => overviewPage(), live: true, nav: 'overview' };
}
