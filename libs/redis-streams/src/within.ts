/** `work`'s result, or `fallback` once `ms` have passed (the work itself goes on, unobserved). */
export async function within<T>(work: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((resolve) => (timer = setTimeout(() => resolve(fallback), Math.max(0, ms))));
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
