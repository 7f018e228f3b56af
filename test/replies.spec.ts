import { groupLag, LAG_COUNT_LIMIT } from '../libs/redis-streams/src/redis/tools/group-lag.js';
import { parseGroupInfo } from '../libs/redis-streams/src/redis/replies/info-replies.js';
import {
  parseAckDeleteReply,
  parseAutoClaimReply,
  parseLastGeneratedId,
  parsePendingRow,
  parseReadReply,
  parseServerVersion,
} from '../libs/redis-streams/src/redis/replies/replies.js';
import { compareIds } from '../libs/redis-streams/src/redis/stream-ids.js';
import { decodeEntry } from '../libs/redis-streams/src/codec/entry-codec.js';
import { JsonDeserializer } from '../libs/redis-streams/src/codec/json.js';
import { isBusyGroup } from '../libs/redis-streams/src/redis/replies/redis-errors.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';

// Pure reply parsing: the shapes below are what Redis 7 and ioredis' three reply modes hand out.
describe('reply parsing', () => {
  const items = [
    ['1-0', ['a', '1']],
    ['2-0', ['b', '2']],
  ];

  // What a reply says of each entry (a parsed entry also carries its custody slot: see FetchedEntry).
  const said = (entries: readonly StreamEntry[]) =>
    entries.map(({ stream, id, fields, deliveryCount }) => ({ stream, id, fields, deliveryCount }));

  it('reads XREADGROUP replies in RESP2, flattened RESP3 and RESP3 map shapes alike', () => {
    const expected = [
      { stream: 's', id: '1-0', fields: ['a', '1'], deliveryCount: 1 },
      { stream: 's', id: '2-0', fields: ['b', '2'], deliveryCount: 1 },
    ];
    expect(said(parseReadReply([['s', items]], 1))).toEqual(expected);
    expect(said(parseReadReply(['s', items], 1))).toEqual(expected);
    expect(said(parseReadReply({ s: items }, 1))).toEqual(expected);
    expect(said(parseReadReply(new Map([['s', items]]), 1))).toEqual(expected);
    expect(parseReadReply(null, 1)).toEqual([]);
    expect(parseReadReply(['s', [], 't', []], 1)).toEqual([]);
  });

  it('reads the XAUTOCLAIM reply of Redis 7 (with its deleted ids) and refuses the 2-element shape of 6.2', () => {
    const claimed = parseAutoClaimReply('s', ['5-0', items, ['3-0']]);
    expect({ ...claimed, entries: said(claimed.entries) }).toEqual({
      cursor: '5-0',
      entries: [
        { stream: 's', id: '1-0', fields: ['a', '1'], deliveryCount: 0 },
        { stream: 's', id: '2-0', fields: ['b', '2'], deliveryCount: 0 },
      ],
      deletedIds: ['3-0'],
    });
    // Redis 6.2 (refused at start): no third element, a deleted entry as nil fields that stays in the PEL.
    expect(() => parseAutoClaimReply('s', ['0-0', [['4-0', null]]])).toThrow(/unexpected XAUTOCLAIM reply shape/);
    expect(() => parseAutoClaimReply('s', ['0-0', [['4-0', null]], []])).toThrow(/unexpected XAUTOCLAIM reply shape/);
  });

  it('rejects shapes it does not know with a clear error', () => {
    expect(() => parseAutoClaimReply('s', 'OK')).toThrow(/unexpected XAUTOCLAIM reply shape/);
    expect(() => parseReadReply(42, 1)).toThrow(/unexpected XREADGROUP reply shape/);
    expect(() => parsePendingRow('1-0', [['1-0']])).toThrow(/unexpected XPENDING reply shape/);
    expect(() => parsePendingRow('1-0', [['2-0', 'c', 5, 1]])).toThrow(/unexpected XPENDING reply shape/);
    expect(() => parseServerVersion('# Server\r\nos:Linux\r\n')).toThrow(/unexpected INFO server reply shape/);
    expect(() => parseLastGeneratedId(['length', 0])).toThrow(/unexpected XINFO STREAM reply shape/);
  });

  it('reads XACKDEL codes per id: the ids not acked (-1) are named; acked and deleted (1) or kept for another group (2) are not', () => {
    expect(parseAckDeleteReply([1, -1, 2, -1], ['1-0', '2-0', '3-0', '4-0'])).toEqual(['2-0', '4-0']);
    expect(parseAckDeleteReply([1, 2], ['1-0', '2-0'])).toEqual([]);
    expect(() => parseAckDeleteReply([1], ['1-0', '2-0'])).toThrow('unexpected XACKDEL reply shape');
    expect(() => parseAckDeleteReply([0], ['1-0'])).toThrow('unexpected XACKDEL reply shape');
    expect(() => parseAckDeleteReply(1, ['1-0'])).toThrow('unexpected XACKDEL reply shape');
  });

  it('reads one XPENDING row per id: owner and delivery count, or nothing when no longer pending', () => {
    expect(parsePendingRow('1-0', [['1-0', 'c', 5, 3]])).toEqual({ consumer: 'c', deliveryCount: 3 });
    expect(parsePendingRow('1-0', [])).toBeUndefined();
  });

  it('reads a group row of XINFO GROUPS (RESP2 list or RESP3 map), with null lag and entries-read kept null', () => {
    const row = ['name', 'g', 'consumers', 1, 'pending', 2, 'last-delivered-id', '5-0', 'entries-read', 101, 'lag', 304];
    expect(parseGroupInfo([row], 'g')).toEqual({ reportedLag: 304, entriesRead: 101, pending: 2, lastDeliveredId: '5-0' });
    expect(
      parseGroupInfo(
        [
          new Map<string, unknown>([
            ['name', 'g'],
            ['pending', 0],
            ['last-delivered-id', '0-0'],
            ['entries-read', null],
            ['lag', null],
          ]),
        ],
        'g',
      ),
    ).toEqual({
      reportedLag: null,
      entriesRead: null,
      pending: 0,
      lastDeliveredId: '0-0',
    });
    expect(parseGroupInfo([row], 'other')).toBeUndefined();
    expect(() => parseGroupInfo([['name', 'g', 'pending', 'x', 'last-delivered-id', '5-0']], 'g')).toThrow(/XINFO GROUPS/);
  });

  it('the lag is the count of entries after the last-delivered id up to the limit, past it the server’s figure only when above the limit too', () => {
    expect(groupLag(304, 0)).toBe(0); // a stale entries-read after a Redis 7.0 failover
    expect(groupLag(304, 4)).toBe(4);
    expect(groupLag(null, 27)).toBe(27); // entries deleted past the group's last read
    expect(groupLag(5000, LAG_COUNT_LIMIT + 1)).toBe(5000);
    expect(groupLag(null, LAG_COUNT_LIMIT + 1)).toBeNull();
    expect(groupLag(3, LAG_COUNT_LIMIT + 1)).toBeNull(); // the server's figure contradicts the count
  });

  it('reads the server version of Redis and of Valkey', () => {
    expect(parseServerVersion('# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n')).toMatchObject({
      major: 7,
      minor: 0,
      server: 'Redis 7.0.15',
    });
    expect(parseServerVersion('# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.0\r\n')).toMatchObject({
      major: 7,
      minor: 2,
      server: 'Valkey 8.1.0 (redis_version 7.2.4)',
    });
  });

  it('orders stream ids numerically, not as strings', () => {
    expect(compareIds('10-0', '9-0')).toBeGreaterThan(0);
    expect(compareIds('5-10', '5-9')).toBeGreaterThan(0);
    expect(compareIds('5-1', '5-1')).toBe(0);
  });

  it('keeps a field named __proto__ as data instead of a prototype', async () => {
    const { payload } = await decodeEntry(
      { stream: 's', id: '1-0', fields: ['__proto__', 'x', 'a', '1'], deliveryCount: 1 },
      new JsonDeserializer(),
    );
    expect(Object.getPrototypeOf(payload)).toBe(Object.prototype);
    expect(Object.keys(payload as object)).toEqual(['__proto__', 'a']);
  });

  it('does not let a JSON payload with __proto__ or constructor keys pollute prototypes', async () => {
    const data = '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"a":1}';
    const { payload } = await decodeEntry({ stream: 's', id: '1-0', fields: ['data', data], deliveryCount: 1 }, new JsonDeserializer());
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(payload)).toBe(Object.prototype);
    expect((payload as { a: number }).a).toBe(1);
  });
});

describe('isBusyGroup', () => {
  it('sees BUSYGROUP wrapped by ioredis Cluster after a redirection ("Too many Cluster redirections", lastNodeError)', () => {
    const wrapped = Object.assign(
      new Error('Too many Cluster redirections. Last error: ReplyError: BUSYGROUP Consumer Group name already exists'),
      {
        lastNodeError: new Error('BUSYGROUP Consumer Group name already exists'),
      },
    );
    expect(isBusyGroup(wrapped)).toBe(true);
    expect(isBusyGroup(new Error('BUSYGROUP Consumer Group name already exists'))).toBe(true);
    expect(
      isBusyGroup(Object.assign(new Error('Too many Cluster redirections.'), { lastNodeError: new Error('MOVED 1 127.0.0.1:7000') })),
    ).toBe(false);
  });

  it('sees it in the message alone: what ioredis 5 and 6 throw when a MOVED used up maxRedirections (no lastNodeError)', () => {
    // ioredis' Cluster#handleError: new Error("Too many Cluster redirections. Last error: " + error)
    const replyError = Object.assign(new Error('BUSYGROUP Consumer Group name already exists'), { name: 'ReplyError' });
    expect(isBusyGroup(new Error(`Too many Cluster redirections. Last error: ${String(replyError)}`))).toBe(true);
    expect(isBusyGroup(new Error('Too many Cluster redirections. Last error: ReplyError: MOVED 1 127.0.0.1:7000'))).toBe(false);
    expect(isBusyGroup(new Error('Too many Cluster redirections. Last error: ReplyError: WRONGTYPE BUSYGROUP lookalike'))).toBe(false);
  });
});
