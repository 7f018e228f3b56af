/* The page's state: one object for the tab's life, held here and changed by the pages, the router and the actions. */
import type { EntriesReply } from './api-replies.js';

/** What the page has seen of one chart's figures since it was opened: times and, per line, values. */
export interface Series {
  at: number[];
  lines: Record<string, (number | null)[]>;
}

/** The stream page's entry search. */
export interface Search {
  from: string;
  to: string;
  field: string;
  value: string;
}

export interface AppState {
  /** Whether this visitor may act (the server asked the action guard for this page's request). */
  actions: boolean;
  /** A transport runs beside the dashboard (in-app): its health is shown. */
  consumer: boolean;
  /** The workers' minIdleMs (the dashboard's option): what counts as idle too long. */
  minIdleMs: number;
  selected: Set<string>;
  reason: string;
  after: Map<string, string>;
  page: number;
  entryFull: boolean;
  last: string;
  message: string;
  /** The delayed entry this tab last moved into its stream, and its id there (its page links it). */
  promoted: { id: string; newId: string } | null;
  rendering: boolean;
  /** A navigation came while rendering: render once more after. */
  again: boolean;
  /** Figures per chart key, kept in the tab (at most an hour of refreshes). */
  series: Map<string, Series>;
  /** The charts' window in minutes. */
  window: number;
  search: Search;
  /** The last search's answer, for the refreshes that follow it (a search is not read again each second). */
  found: { params: string; page: EntriesReply } | null;
  /** The hash of the page on screen (what `last` shows). */
  shown: string;
  /** A pointer is down on the page: refreshes wait until it is up. */
  holding: boolean;
  /** A delete waiting out its undo time: what it will delete, and its timer. */
  undo: { label: string; timer: number; run: () => void } | null;
}

export const state: AppState = {
  actions: false,
  consumer: false,
  minIdleMs: 30_000,
  selected: new Set(),
  reason: '',
  after: new Map(),
  page: 0,
  entryFull: false,
  last: '',
  message: '',
  promoted: null,
  rendering: false,
  again: false,
  series: new Map(),
  window: 5,
  search: { from: '', to: '', field: '', value: '' },
  undo: null,
  found: null,
  holding: false,
  shown: '',
};
