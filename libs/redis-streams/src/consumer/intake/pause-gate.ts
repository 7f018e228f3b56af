import { firstValueFrom, race, timer } from 'rxjs';
import type { PauseWatch } from './pause-watch.js';
import type { ReadAsk, ReadGate, ReadNext, ReadResult } from './read-gate.js';

/** The operator's pause (`redis-streams pause`): the park reads the streams not paused, and waits while all are. */
export class PauseGate implements ReadGate {
  readonly changed$;

  constructor(private readonly pause: Pick<PauseWatch, 'readable' | 'changed$'>) {
    this.changed$ = pause.changed$;
  }

  // Not async: once per park, it forwards the read as it is unless something is paused (no frame of its own).
  read(ask: ReadAsk, next: ReadNext): Promise<ReadResult> {
    const readable = this.pause.readable();
    // Every stream paused: the beat waits, woken by a resume (or the stop).
    if (readable.length === 0) return allPaused(ask);
    return next(readable.length === ask.streams.length ? ask : { ...ask, streams: ask.streams.filter((s) => readable.includes(s)) });
  }
}

async function allPaused(ask: ReadAsk): Promise<ReadResult> {
  await firstValueFrom(race(timer(ask.blockMs || ask.beatMs), ask.wake$));
  return { entries: [] };
}
