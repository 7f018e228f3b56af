import type { OrderedStream } from './partition-owner.js';
import { AlwaysTenure } from './always.js';
import { PartitionTenure, type PartitionTenureDeps } from './partition-tenure.js';
import type { Tenure } from './tenure.js';

/** A reader's tenure as the plan names it. */
export interface TenurePlan {
  /** Set for an ordered pattern's stream (one per reader): it reads only while this consumer owns the partition. */
  ordered?: OrderedStream | undefined;
}

/** What any tenure may need of the reader (each takes its part). */
export type TenureDeps = Omit<PartitionTenureDeps, 'ordered' | 'commands'> & {
  commands: PartitionTenureDeps['commands'] & ConstructorParameters<typeof AlwaysTenure>[0]['commands'];
};

/** The plan's tenure for a reader: partition ownership for an ordered stream, otherwise always. */
export function tenureOf(plan: TenurePlan, deps: TenureDeps): Tenure {
  return plan.ordered ? new PartitionTenure({ ...deps, ordered: plan.ordered }) : new AlwaysTenure(deps);
}
