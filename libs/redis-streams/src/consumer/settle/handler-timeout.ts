/** The handler keeps running after a timeout (JS cannot cancel it); only its outcome is ignored. */
export function withTimeout(work: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`handler timed out after ${ms} ms`)), ms);
  });
  return Promise.race([work, timedOut]).finally(() => clearTimeout(timer));
}
