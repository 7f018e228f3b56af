// Other NestJS Redis Streams transports: what the run tried, how, and what came of it. Nothing is
// claimed that the run did not find out: the registry is searched (`npm search`), every candidate
// (the search's Nest-transport-looking hits, and names found in public docs and READMEs) is looked up
// (`npm view`), and each one the registry has is dry-run installed (`npm install --dry-run`, nothing
// written) into a scratch folder whose package.json pins this project's Nest, as it would be added here.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

export interface TransportAttempt {
  name: string;
  /** Where the name came from. */
  from: 'npm search' | 'public docs';
  /** The commands run, in order. */
  how: string[];
  /** The version the registry has, if any. */
  version?: string;
  /** One line: what came of it. */
  outcome: string;
}

export interface OtherTransports {
  search: { command: string; outcome: string };
  attempts: TransportAttempt[];
}

/** Names of NestJS Redis Streams transports seen in public docs and READMEs (npm pages, GitHub). */
export const KNOWN_CANDIDATES = [
  '@tamimaj/nestjs-redis-streams',
  'nestjs-redis-stream-microservice',
  '@stijlbreuk/nestjs-redis-streams-transport',
  '@de-novo/nestjs-redis-streams',
  '@w3f/nest-redis-streams',
];
/** This package's own name: a search hit under it is us. */
const OURS = 'nestjs-redis-streams';

const run = promisify(execFile);
const NPM_TIMEOUT_MS = 90_000;

export async function tryOtherTransports(log: (line: string) => void): Promise<OtherTransports> {
  const searchArgs = ['search', 'nestjs', 'redis', 'streams', '--json'];
  const search = { command: `npm ${searchArgs.join(' ')}`, outcome: '' };
  const found: string[] = [];
  try {
    const hits = JSON.parse((await npm(searchArgs)).stdout) as { name: string; description?: string; keywords?: string[] }[];
    for (const hit of hits) {
      const text = `${hit.name} ${hit.description ?? ''} ${(hit.keywords ?? []).join(' ')}`.toLowerCase();
      if (
        hit.name !== OURS &&
        text.includes('nest') &&
        text.includes('redis') &&
        text.includes('stream') &&
        /transport|strateg|microservice/.test(text)
      )
        found.push(hit.name);
    }
    search.outcome = `${hits.length} results, ${found.length} look like Nest transports${found.length ? `: ${found.join(', ')}` : ''}`;
  } catch (err) {
    search.outcome = `failed: ${npmError(err)}`;
  }
  log(`  ${search.command}: ${search.outcome}`);
  const candidates = [
    ...found.map((name) => ({ name, from: 'npm search' as const })),
    ...KNOWN_CANDIDATES.filter((n) => !found.includes(n)).map((name) => ({ name, from: 'public docs' as const })),
  ];
  const attempts: TransportAttempt[] = [];
  for (const { name, from } of candidates) {
    const attempt: TransportAttempt = { name, from, how: [`npm view ${name} version`], outcome: '' };
    try {
      attempt.version = JSON.parse((await npm(['view', name, 'version', '--json'])).stdout) as string;
    } catch (err) {
      attempt.outcome = `npm view: ${npmError(err)}`;
    }
    if (attempt.version !== undefined) attempt.outcome = await dryRunInstall(name, attempt);
    attempts.push(attempt);
    log(`  ${name}: ${attempt.version ? `${attempt.version}, ` : ''}${attempt.outcome}`);
  }
  return { search, attempts };
}

/** `npm install --dry-run` of `name` beside this project's Nest (as a dev dependency here would be). */
async function dryRunInstall(name: string, attempt: TransportAttempt): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-transport-'));
  try {
    const pinned = Object.fromEntries(
      ['@nestjs/common', '@nestjs/core', '@nestjs/microservices', 'reflect-metadata', 'rxjs'].map((p) => [p, installedVersion(p)]),
    );
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'bench-transport-probe', version: '0.0.0', private: true, dependencies: pinned }),
    );
    const args = ['install', '--dry-run', '--no-save', '--ignore-scripts', '--no-audit', '--no-fund', `${name}@${attempt.version}`];
    attempt.how.push(
      `npm ${args.join(' ')} (scratch folder, package.json pins ${Object.entries(pinned)
        .map(([p, v]) => `${p}@${v}`)
        .join(', ')})`,
    );
    try {
      const { stdout } = await npm(args, dir);
      const added = /added (\d+) packages?/.exec(stdout)?.[1];
      return `resolves beside this project's Nest (dry run${added ? `: ${added} packages` : ''}); not benchmarked: bench/systems.ts has no adapter for it`;
    } catch (err) {
      return `does not install beside this project's Nest: ${npmError(err)}`;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function npm(args: string[], cwd?: string) {
  return run('npm', args, { cwd, timeout: NPM_TIMEOUT_MS, maxBuffer: 16 * 2 ** 20 });
}

/** npm's error, in one line: its code and the first line that says why (a conflicting peer, a 404…). */
function npmError(err: unknown): string {
  const e = err as { stderr?: string; stdout?: string; message?: string; killed?: boolean };
  if (e.killed) return `no answer within ${NPM_TIMEOUT_MS / 1000} s`;
  const text = `${e.stderr ?? ''}\n${e.stdout ?? ''}`;
  const code = /npm (?:error|ERR!) code (\S+)/.exec(text)?.[1];
  const lines = text.split('\n').map((l) => l.replace(/^npm (?:error|ERR!)\s*/, '').trim());
  const why =
    code === 'ERESOLVE'
      ? lines.find((l) => /^(Could not resolve dependency|Conflicting peer dependency):?/.test(l)) &&
        lines
          .filter((l) => /^peer |^Conflicting peer dependency|^Found: /.test(l))
          .slice(0, 3)
          .join('; ')
      : lines.find((l) => /^404 Not Found|^\d{3} /.test(l) || /not found|ENOTFOUND|ETIMEDOUT|ECONNREFUSED/i.test(l));
  return [code, why?.replace(/\?\S*/, '')].filter(Boolean).join(': ') || (e.message ?? String(err)).split('\n')[0]!;
}

/** The version of `pkg` installed in this project (this file runs from dist/bench-build/bench/). */
function installedVersion(pkg: string): string {
  return (JSON.parse(readFileSync(new URL(`../../../node_modules/${pkg}/package.json`, import.meta.url), 'utf8')) as { version: string })
    .version;
}
