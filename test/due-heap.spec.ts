/** The scheduled retries' min-heap, without Redis. */
import { DueHeap, type DueItem } from '../libs/redis-streams/src/consumer/custody/due-heap.js';

const item = (at: number, id = `${at}-0`, stream = 's'): DueItem => ({ at, stream, id });

/** Pops everything, in the order the heap gives. */
const drain = (heap: DueHeap): DueItem[] => {
  const out: DueItem[] = [];
  for (let next = heap.pop(); next !== undefined; next = heap.pop()) out.push(next);
  return out;
};

/** A small deterministic generator (no flaky seeds): Park–Miller. */
const numbers = (seed: number) => () => (seed = (seed * 48_271) % 2_147_483_647) / 2_147_483_647;

describe('DueHeap: the scheduled retries, earliest first', () => {
  it('empty: size 0, nothing to peek or pop', () => {
    const heap = new DueHeap();
    expect(heap.size).toBe(0);
    expect(heap.peek()).toBeUndefined();
    expect(heap.pop()).toBeUndefined();
    expect(heap.size).toBe(0);
  });

  it('peek shows the earliest without taking it; pop takes it', () => {
    const heap = new DueHeap();
    for (const at of [30, 10, 20]) heap.push(item(at));
    expect(heap.peek()?.at).toBe(10);
    expect(heap.size).toBe(3);
    expect(heap.pop()?.at).toBe(10);
    expect(heap.peek()?.at).toBe(20);
    expect(heap.size).toBe(2);
  });

  it('pops 1,000 items pushed in random order by due time, none lost nor repeated', () => {
    const random = numbers(7);
    const heap = new DueHeap();
    const items = Array.from({ length: 1000 }, (_, i) => item(Math.floor(random() * 500), `${i}-0`));
    for (const i of items) heap.push(i);
    const popped = drain(heap);
    expect(popped.map((i) => i.at)).toEqual(items.map((i) => i.at).sort((a, b) => a - b));
    expect(new Set(popped.map((i) => i.id)).size).toBe(1000);
  });

  it('pushes and pops interleaved: each pop is the earliest of what is left', () => {
    const random = numbers(11);
    const heap = new DueHeap();
    const model: number[] = [];
    for (let round = 0; round < 2000; round++) {
      if (random() < 0.6 || model.length === 0) {
        const at = Math.floor(random() * 100);
        heap.push(item(at));
        model.push(at);
      } else {
        const min = Math.min(...model);
        model.splice(model.indexOf(min), 1);
        expect(heap.pop()?.at).toBe(min);
      }
      expect(heap.size).toBe(model.length);
    }
  });

  it('keeps items of equal due time, and stale duplicates of one entry (the caller skips them)', () => {
    const heap = new DueHeap();
    for (const id of ['a', 'b', 'c']) heap.push(item(5, id));
    // The same entry rescheduled: the old item stays in until popped.
    heap.push(item(1, 'a'));
    expect(heap.size).toBe(4);
    const popped = drain(heap);
    expect(popped[0]).toEqual(item(1, 'a'));
    expect(
      popped
        .slice(1)
        .map((i) => i.id)
        .sort(),
    ).toEqual(['a', 'b', 'c']);
  });

  it('reset replaces the content, ordered anew', () => {
    const heap = new DueHeap();
    for (const at of [1, 2, 3]) heap.push(item(at));
    heap.reset([item(9), item(4), item(7)]);
    expect(heap.size).toBe(3);
    expect(drain(heap).map((i) => i.at)).toEqual([4, 7, 9]);
  });
});
