/** A promise the test opens itself: a handler awaits `gate.wait` until the test calls `gate.open()`. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}
