import { boolean, InvalidOptionError, positiveInt, rejectUnknown, shown } from './validate.js';

/**
 * How durable a write must be before it counts as done: on `replicas` replicas (WAIT), and with
 * `fsync` also fsynced to the append-only file of the master and of those replicas (WAITAOF, Redis
 * or Valkey ≥ 7.2). Replication stays asynchronous: this only makes the writer wait for it, and a
 * failover can still promote a replica that missed a write when several lag (docs/failure-semantics.md).
 */
export interface Durability {
  /** Replicas that must hold the write. Default: 1 (0 only with `fsync`: the master's own AOF). */
  replicas?: number;
  /** Also fsynced to the AOF (master's and the replicas' counted): WAITAOF 1 <replicas>. Default: false. */
  fsync?: boolean;
  /** The longest one write waits for that (WAIT's timeout) before it is reported unconfirmed. Default: 1000. */
  timeoutMs?: number;
}

/** What ordered readers do when replicas do not confirm in time (see DurableAcks.whenUnconfirmed). */
export type WhenUnconfirmed = 'hold' | 'carry-on';

/**
 * Durable acks of an ordered pattern: a key's next entry starts only once its predecessor's ack (or
 * dead-letter move) and the owner's hold on the partition are on `replicas` replicas, so a master
 * lost with a lagging replica cannot make an entry run again after a later one of its key.
 */
export interface DurableAcks extends Durability {
  /**
   * No replica confirmed within `timeoutMs` (none reachable, or all lagging): `'hold'` keeps the
   * partition and starts nothing more until one does (order kept, work waits); `'carry-on'` goes on
   * without waiting (reported degraded: a master lost meanwhile can re-run entries out of order), and
   * waits again once a replica confirms. Either way health, inspect, the dashboard and a metric say so.
   * Default: `'hold'`.
   */
  whenUnconfirmed?: WhenUnconfirmed;
}

export interface ResolvedDurability {
  replicas: number;
  fsync: boolean;
  timeoutMs: number;
}

export interface ResolvedDurableAcks extends ResolvedDurability {
  whenUnconfirmed: WhenUnconfirmed;
}

export const DURABILITY_DEFAULTS = { replicas: 1, fsync: false, timeoutMs: 1000, whenUnconfirmed: 'hold' } as const;

/** A replica count past any real deployment: a typo, not a setting (Redis caps replicas per master far below). */
const MAX_REPLICAS = 100;
/** A wait past a minute blocks its connection for as long: a typo of units. */
export const MAX_DURABILITY_TIMEOUT_MS = 60_000;

/** Validates a `durability` option (`option` names it in the error); `false`/undefined: none. */
export function resolveDurability(option: string, input: unknown): ResolvedDurability | undefined {
  if (input === undefined || input === false) return undefined;
  if (input === true) throw new InvalidOptionError(option, 'must be an object ({ replicas, fsync, timeoutMs }) or false, got true');
  rejectUnknown(input as object, ['replicas', 'fsync', 'timeoutMs'], `${option}.`);
  return durabilityOf(option, input as Durability);
}

/** Validates `durableAcks` (of the server, or a pattern's). */
export function resolveDurableAcks(option: string, input: unknown): ResolvedDurableAcks | undefined {
  if (input === undefined || input === false) return undefined;
  if (input === true)
    throw new InvalidOptionError(option, 'must be an object ({ replicas, fsync, timeoutMs, whenUnconfirmed }) or false, got true');
  rejectUnknown(input as object, ['replicas', 'fsync', 'timeoutMs', 'whenUnconfirmed'], `${option}.`);
  const { whenUnconfirmed = DURABILITY_DEFAULTS.whenUnconfirmed } = input as DurableAcks;
  if (whenUnconfirmed !== 'hold' && whenUnconfirmed !== 'carry-on')
    throw new InvalidOptionError(`${option}.whenUnconfirmed`, `must be 'hold' or 'carry-on', got ${shown(whenUnconfirmed)}`);
  return { ...durabilityOf(option, input as Durability), whenUnconfirmed };
}

function durabilityOf(option: string, input: Durability): ResolvedDurability {
  const fsync = boolean(`${option}.fsync`, input.fsync, DURABILITY_DEFAULTS.fsync);
  let replicas: number = DURABILITY_DEFAULTS.replicas;
  if (input.replicas !== undefined) {
    const r = input.replicas;
    if (typeof r !== 'number' || !Number.isSafeInteger(r) || r < 0 || r > MAX_REPLICAS)
      throw new InvalidOptionError(`${option}.replicas`, `must be a whole number from 0 to ${MAX_REPLICAS}, got ${shown(r)}`);
    replicas = r;
  }
  if (replicas === 0 && !fsync)
    throw new InvalidOptionError(`${option}.replicas`, 'is 0 without fsync: that waits for nothing; use false for no durability');
  const timeoutMs = positiveInt(`${option}.timeoutMs`, input.timeoutMs, DURABILITY_DEFAULTS.timeoutMs);
  if (timeoutMs > MAX_DURABILITY_TIMEOUT_MS)
    throw new InvalidOptionError(`${option}.timeoutMs`, `must be at most ${MAX_DURABILITY_TIMEOUT_MS}, got ${timeoutMs}`);
  return { replicas, fsync, timeoutMs };
}

/** How a durability reads in a message: `1 replica`, `2 replicas and the AOF`. */
export function describeDurability(d: ResolvedDurability): string {
  const copies = d.replicas === 0 ? '' : `${d.replicas} replica${d.replicas === 1 ? '' : 's'}`;
  if (!d.fsync) return copies;
  return copies === '' ? "the master's AOF (fsynced)" : `${copies}, fsynced (and the master's AOF)`;
}
