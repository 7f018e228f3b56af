#!/usr/bin/env node
// Counts the hot path's branch lines that test a flow capability (ordering, rate limits, pause, the
// read's CLAIM): issue 49's measure of "modes inside the loop". A line counts when it branches (if,
// while, ?:, &&, ||, ??, case) and names one of the capabilities' identifiers; comments do not count.
// `node scripts/flow-branches.mjs [ref]`: the working tree, or the files at a git ref.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

const HOT = [
  'reader',
  'parker',
  'batch-settler',
  'decide',
  'reclaimer',
  'self-drain',
  'fetched-entries',
  'ack-pipeline',
  'group-keeper',
  'custody',
];
const CAPABILITY =
  /\b(ordered|owner|keyQueues|partition\w*|rateLimit|keyRateLimit|keyLimits|limiter|limited\w*|grants?|ungranted|pause[sd]?|anyPaused|claimsOnRead|claimedLast|claimMinIdleMs|claimAllowed|fenced?)\b/;
const BRANCH = /\b(if|while|case)\b|\?[^.?]|&&|\|\||\?\?/;
const ref = process.argv[2];
const read = (file) =>
  !file
    ? ''
    : ref
      ? execFileSync('git', ['show', `${ref}:${file}`], { encoding: 'utf8' })
      : existsSync(file)
        ? readFileSync(file, 'utf8')
        : '';
// Each file where it is (the consumer's folders, or the flat folder of older refs).
const DIR = 'libs/redis-streams/src/consumer';
const files = ref
  ? execFileSync('git', ['ls-tree', '-r', '--name-only', ref, DIR], { encoding: 'utf8' }).split('\n')
  : execFileSync('git', ['ls-files', DIR], { encoding: 'utf8' }).split('\n');
const fileOf = (name) => files.find((f) => f.endsWith(`/${name}.ts`)) ?? '';
let total = 0;
for (const name of HOT) {
  const lines = read(fileOf(name)).split('\n');
  const hits = lines.filter(
    (l) => !/^\s*(\/\/|\*|\/\*)/.test(l) && BRANCH.test(l.replace(/'[^']*'|`[^`]*`/g, '').replace(/\w\?:/g, ':')) && CAPABILITY.test(l),
  );
  total += hits.length;
  if (hits.length > 0) console.log(`${name}.ts: ${hits.length}\n${hits.map((l) => `  ${l.trim()}`).join('\n')}`);
}
console.log(`hot-path branch lines on ordering, rate limits, pause and the read's CLAIM: ${total}`);
