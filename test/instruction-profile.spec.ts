/**
 * The bench's instruction profile (bench/instruction-profile.ts): callgrind's window file, written with
 * `--dump-instr=yes`, read with node's perf map, which names V8's generated code. The files here are small
 * copies of the format callgrind and node write (name compression, relative addresses, a call's inclusive line).
 */
import { instructionProfile } from '../bench/instruction-profile.js';

const PERF_MAP = [
  '7f0000001000 100 JS:*parseReadReply file:///x/libs/redis-streams/dist/esm/redis/replies/replies.js:4:31',
  '7f0000002000 80 JS:*_Decoder_decodeArray /x/node_modules/ioredis/built/resp/decoder.js:503:56',
  '7f0000003000 40 JS:^handleAll file:///x/dist/bench-build/bench/systems.js:79:25',
].join('\n');

const CALLGRIND = [
  'version: 1',
  'creator: callgrind-3.19.0',
  'positions: instr line',
  'events: Ir',
  'summary: 1000',
  '',
  'ob=(1) ???',
  'fn=(1) 0x000000007f0000001000',
  '0x7f0000001010 0 100',
  '+4 * 50',
  // A call from the engine's code into the decoder's: its line is the callee's inclusive cost, not the caller's.
  'cob=(1)',
  'cfn=(2) 0x000000007f0000002000',
  'calls=1 0x7f0000002000 0',
  '* * 400',
  'fn=(2)',
  '0x7f0000002008 0 300',
  'ob=(2) /usr/bin/node',
  'fn=(3) v8::internal::compiler::GraphReducer::ReduceTop()',
  '0x1000 0 90',
  'fn=(4) Builtins_WeakMapLookupHashIndex',
  '0x2000 0 40',
  'fn=(5) Builtins_PromiseFulfillReactionJob',
  '0x3000 0 10',
  'fn=(6) v8::internal::Scavenger::ScavengeObject()',
  '0x4000 0 7',
  'fn=(3)',
  '0x1004 0 10',
  'ob=(1)',
  'fn=(7) 0x000000007f0000003000',
  '0x7f0000003004 0 3',
].join('\n');

describe('instructionProfile', () => {
  it('sums self costs by function and kind, per entry, naming generated code from the perf map', () => {
    const profile = instructionProfile(CALLGRIND, PERF_MAP, 10);
    expect(profile.byKind['this transport (JavaScript)']).toBe(15);
    expect(profile.byKind['ioredis (JavaScript)']).toBe(30);
    expect(profile.byKind["V8's optimizing compiler"]).toBe(10);
    expect(profile.byKind["WeakMap / WeakSet builtins (ioredis' private fields)"]).toBe(4);
    expect(profile.byKind['promise and microtask builtins']).toBe(1);
    expect(profile.byKind['garbage collection']).toBe(0.7);
    expect(profile.byKind['other JavaScript (the bench, handlers)']).toBe(0.3);
    // Everything but the call's inclusive line, once.
    expect(Object.values(profile.byKind).reduce((a, b) => a + b, 0)).toBeCloseTo(61);
    // callgrind's own counter (`summary:`), apart from its cost lines.
    expect(profile.counted).toBe(100);
    expect(profile.top.slice(0, 3)).toEqual([
      { name: 'JS:*_Decoder_decodeArray ioredis/built/resp/decoder.js:503:56', perEntry: 30 },
      { name: 'JS:*parseReadReply nestjs-redis-streams/redis/replies/replies.js:4:31', perEntry: 15 },
      { name: 'v8::internal::compiler::GraphReducer::ReduceTop()  [node]', perEntry: 10 },
    ]);
  });
});

describe('instructionProfile: callgrind marks a recursive function', () => {
  it("names generated code whose callgrind name carries a recursion mark (0x…'2) from the perf map too (review-m)", () => {
    const recursive = ['positions: instr line', 'events: Ir', 'ob=(1) ???', "fn=(1) 0x000000007f0000002000'2", '0x7f0000002010 0 70'].join(
      '\n',
    );
    const profile = instructionProfile(recursive, PERF_MAP, 10);
    expect(profile.byKind['ioredis (JavaScript)']).toBe(7);
    expect(profile.top).toEqual([{ name: 'JS:*_Decoder_decodeArray ioredis/built/resp/decoder.js:503:56', perEntry: 7 }]);
  });
});
