export { appScript } from './app-script.js';

/** The page: its script and style come from the same path (CSP 'self'); the app renders into <main>. */
export function pageHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Redis Streams dashboard</title>
<link rel="stylesheet" href="app.css">
<script src="app.js" defer></script>
</head>
<body>
<header><a href="#/" class="brand">Redis Streams</a><nav><a href="#/">Overview</a><a href="#/dead">Dead letters</a><a href="#/cluster">Cluster</a></nav><span id="status" role="status"></span></header>
<main id="app" tabindex="-1"><p>Loading…</p></main>
</body>
</html>
`;
}

export const APP_CSS = `
:root { color-scheme: light dark; --line: #8884; --warn: #c60; --bad: #c22; --ok: #282; font: 14px/1.4 system-ui, sans-serif; }
body { margin: 0; }
header { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1rem; border-bottom: 1px solid var(--line); }
header nav { display: flex; gap: 1rem; }
.brand { font-weight: 600; text-decoration: none; color: inherit; }
main { padding: 1rem; }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; }
th, td { border-bottom: 1px solid var(--line); padding: .25rem .6rem; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
h2 { font-size: 1.1rem; margin: 1.2rem 0 .3rem; }
.attention li { color: var(--warn); }
.bad { color: var(--bad); }
.muted { opacity: .7; }
pre { white-space: pre-wrap; word-break: break-all; background: #8881; padding: .5rem; max-height: 30rem; overflow: auto; }
button { font: inherit; padding: .2rem .7rem; margin: 0 .3rem .3rem 0; cursor: pointer; }
button:focus-visible, a:focus-visible, input:focus-visible { outline: 2px solid Highlight; outline-offset: 2px; }
svg.spark { vertical-align: middle; }
.name { max-width: 28rem; overflow-wrap: anywhere; }
`;
