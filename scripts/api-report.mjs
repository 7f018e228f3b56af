// npm run api:check / api:update: the public API of every entry point in the library's package.json "exports",
// as API Extractor reports it from the build's typings (npm run build first), against the reports committed in
// libs/redis-streams/api/ (<entry>.api.md; "." is index). --check fails on any difference and prints it as a diff;
// --update rewrites the reports. Config: libs/redis-streams/api-extractor.json.
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const { CompilerState, Extractor, ExtractorConfig } = createRequire(import.meta.url)('@microsoft/api-extractor');

const mode = process.argv[2];
if (mode !== '--check' && mode !== '--update') {
  console.error('usage: node scripts/api-report.mjs --check | --update');
  process.exit(2);
}
const lib = fileURLToPath(new URL('../libs/redis-streams/', import.meta.url));
const configFile = `${lib}api-extractor.json`;
const base = ExtractorConfig.loadFile(configFile);
const { exports } = JSON.parse(readFileSync(`${lib}package.json`, 'utf8'));

let failed = false;
const reports = new Set();
// One TypeScript program for every entry point (the config's "include" holds all the typings): a third of the time.
let compilerState;
for (const [entry, target] of Object.entries(exports)) {
  if (typeof target === 'string') continue; // "./package.json"
  const name = entry === '.' ? 'index' : entry.slice(2).replaceAll('/', '-');
  const report = `libs/redis-streams/api/${name}.api.md`;
  reports.add(`${name}.api.md`);
  const config = ExtractorConfig.prepare({
    configObject: {
      ...base,
      mainEntryPointFilePath: `<projectFolder>/${target.import.types}`,
      apiReport: { ...base.apiReport, reportFileName: name },
    },
    configObjectFullPath: configFile,
    packageJsonFullPath: `${lib}package.json`,
  });
  if (!existsSync(config.mainEntryPointFilePath)) {
    console.error(`api: ${config.mainEntryPointFilePath} is missing: run npm run build first`);
    process.exit(1);
  }
  compilerState ??= CompilerState.create(config);
  const result = Extractor.invoke(config, {
    compilerState,
    localBuild: mode === '--update',
    printApiReportDiff: mode === '--check',
    messageCallback: (message) => {
      if (message.logLevel === 'info' || message.logLevel === 'verbose') message.handled = true;
    },
  });
  if (!result.succeeded) {
    failed = true;
    console.error(
      result.apiReportChanged && mode === '--check'
        ? `api: the public API of "${entry}" differs from ${report} (diff above). If that is meant, run \`npm run api:update\` and commit the report: its diff is reviewed (CONTRIBUTING.md, "Versioning and deprecation").`
        : `api: API Extractor failed on "${entry}" (above)`,
    );
  } else {
    console.log(`api: "${entry}" ${mode === '--update' && result.apiReportChanged ? 'written to' : 'matches'} ${report}`);
  }
}
// A report whose entry point left "exports": its removal is a diff to review too.
for (const file of readdirSync(`${lib}api`)) {
  if (!file.endsWith('.api.md') || reports.has(file)) continue;
  if (mode === '--update') {
    rmSync(`${lib}api/${file}`);
    console.log(`api: removed libs/redis-streams/api/${file} (no such entry point)`);
  } else {
    failed = true;
    console.error(
      `api: libs/redis-streams/api/${file} reports an entry point that package.json "exports" no longer has: run \`npm run api:update\``,
    );
  }
}
process.exit(failed ? 1 : 0);
