import { FairPolicy } from './fair-policy.js';
import { BATCH_SETTLE, type SettlePlan, type SettlePolicy, type SettlePolicyDeps } from './settle-policy.js';

/** The plan's settle policy for a reader. */
export function settlePolicyOf(plan: SettlePlan, deps: SettlePolicyDeps): SettlePolicy {
  return plan.fair ? new FairPolicy(plan.fair, deps) : BATCH_SETTLE;
}
