import { Observable } from 'rxjs';

/**
 * `hot` (already running) as an Observable that remembers whether anyone subscribed; when it
 * fails and nobody has, `unobserved(err)` is called once. Decided on the next turn of the event
 * loop, so that a caller subscribing right after the failure (same tick) counts as observing it.
 */
export function watchUnobserved<T>(hot: Observable<T>, unobserved: (err: unknown) => void): Observable<T> {
  let observed = false;
  hot.subscribe({
    error: (err: unknown) => {
      if (!observed) setImmediate(() => observed || unobserved(err));
    },
  });
  return new Observable<T>((subscriber) => {
    observed = true;
    return hot.subscribe(subscriber);
  });
}
