/** What a truthy value of T can be: `cond && value` waits for `value`. */
export type Truthy<T> = Exclude<T, false | 0 | '' | null | undefined>;

export interface WaitForOptions {
  /** Default 10 000 ms. */
  timeoutMs?: number;
  /** Default 20 ms. */
  intervalMs?: number;
  /** What is waited for, in the timeout's message. */
  message?: string;
  /**
   * A measure of the work under way (a count, compared with `!==`: a primitive): while it changes, the timeout
   * starts again. Wait for `>=` a target and assert it after, or a count that overshoots waits on.
   */
  progress?: () => unknown;
}

/** Polls `condition` until it returns a truthy value or the deadline passes (a throw counts as not yet); never a fixed sleep. */
export function waitFor<T>(condition: () => T | Promise<T>, options?: WaitForOptions): Promise<Truthy<T>>;
