/** The mark: a stream's three lanes, in the header and as the favicon (served as favicon.svg, CSP 'self'). */
const MARK = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32" width="22" height="22" aria-hidden="true"><rect width="32" height="32" rx="7" fill="#d6336c"/><path d="M7 10h13M7 16h18M7 22h9" stroke="#fff" stroke-width="3" stroke-linecap="round"/><circle cx="24" cy="10" r="2.5" fill="#fff"/><circle cx="20" cy="22" r="2.5" fill="#fff"/></svg>`;

export const FAVICON_SVG = MARK;

/** The page: its script and style come from the same path (CSP 'self'); the app renders into <main>. */
export function pageHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Redis Streams dashboard</title>
<link rel="icon" href="favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="app.css">
<script src="app.js" defer></script>
</head>
<body>
<header class="top">
<a href="#/" class="brand">${MARK}<span>Redis Streams</span></a>
<nav aria-label="Pages"><a href="#/" data-nav="overview">Overview</a><a href="#/dead" data-nav="dead">Dead letters</a><a href="#/cluster" data-nav="cluster">Cluster</a></nav>
<span class="spacer"></span>
<span id="status" role="status" class="muted small"></span>
<button type="button" id="theme" class="ghost" aria-label="Dark theme" aria-pressed="false">◐</button>
</header>
<main id="app" tabindex="-1"><p class="muted">Loading…</p></main>
</body>
</html>
`;
}

/* Light and dark by custom properties; status colours always come with a word and a shape (▲ ✖ ●), never colour alone. */
export const APP_CSS = `
:root {
  color-scheme: light; --bg: #f6f7f9; --panel: #fff; --text: #1d2330; --muted: #5d6678; --line: #e2e5eb; --head: #f0f2f5;
  --accent: #2455c3; --ok: #1f7a46; --ok-bg: #e3f4ea; --warn: #9a5b00; --warn-bg: #fff1d6; --bad: #b42318; --bad-bg: #fde7e5;
  --c1: #2f6fde; --c2: #d6336c; --c3: #2f9e6b; --c4: #c77c02; --shadow: 0 1px 2px #0000000f;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
:root[data-theme="dark"] {
  color-scheme: dark; --bg: #11141a; --panel: #181c24; --text: #e6e9ef; --muted: #9aa3b5; --line: #2a303c; --head: #1e232d;
  --accent: #7aa7ff; --ok: #5fd08f; --ok-bg: #153322; --warn: #f0b44c; --warn-bg: #3a2a0c; --bad: #ff8a80; --bad-bg: #3d1714;
  --c1: #6f9dff; --c2: #ff6f9e; --c3: #5fd08f; --c4: #f0b44c; --shadow: none;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--text); }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
.top { display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; align-items: center; padding: .55rem 1rem; background: var(--panel); border-bottom: 1px solid var(--line); }
.brand { display: flex; gap: .5rem; align-items: center; font-weight: 650; color: var(--text); }
.top nav { display: flex; gap: .2rem; flex-wrap: wrap; }
.top nav a { padding: .25rem .6rem; border-radius: 6px; color: var(--muted); }
.top nav a[aria-current="page"] { background: var(--head); color: var(--text); font-weight: 600; }
.spacer { flex: 1; }
main { padding: 1rem; max-width: 1320px; margin: 0 auto; }
h1 { font-size: 1.35rem; margin: .2rem 0 .8rem; }
h2 { font-size: 1.05rem; margin: 0 0 .6rem; }
h3 { font-size: .95rem; margin: .8rem 0 .4rem; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: .9rem 1rem; margin: 0 0 1rem; box-shadow: var(--shadow); min-width: 0; }
.strip { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: .75rem; margin-bottom: 1rem; }
.stat { background: var(--panel); border: 1px solid var(--line); border-left: 4px solid var(--ok); border-radius: 10px; padding: .6rem .8rem; box-shadow: var(--shadow); min-width: 0; }
.stat.attention { border-left-color: var(--warn); } .stat.failing { border-left-color: var(--bad); }
.stat .label { color: var(--muted); font-size: .8rem; text-transform: uppercase; letter-spacing: .04em; }
.stat .value { font-size: 1.6rem; font-weight: 650; font-variant-numeric: tabular-nums; }
.chip { display: inline-flex; gap: .3rem; align-items: center; font-size: .78rem; font-weight: 600; padding: .05rem .5rem; border-radius: 999px; white-space: nowrap; }
.chip.healthy { color: var(--ok); background: var(--ok-bg); } .chip.attention { color: var(--warn); background: var(--warn-bg); } .chip.failing { color: var(--bad); background: var(--bad-bg); }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(280px, 1fr)); gap: .75rem; }
.chart { min-width: 0; }
.chart svg { display: block; width: 100%; height: 150px; overflow: visible; }
.chart .axis { fill: var(--muted); font-size: 10px; }
.chart .grid { stroke: var(--line); }
.chart .hover { stroke: var(--muted); stroke-dasharray: 3 3; }
.chart .legend { display: flex; flex-wrap: wrap; gap: .2rem .8rem; font-size: .8rem; color: var(--muted); }
.chart .legend strong { color: var(--text); font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: .7rem; height: .2rem; border-radius: 2px; vertical-align: middle; margin-right: .25rem; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; width: 100%; }
th { background: var(--head); color: var(--muted); font-weight: 600; font-size: .8rem; white-space: nowrap; }
th, td { border-bottom: 1px solid var(--line); padding: .35rem .6rem; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:hover { background: var(--head); }
.id, time, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85em; white-space: nowrap; }
.name { overflow-wrap: anywhere; }
td .name { display: inline-block; min-width: 16ch; }
.reason { min-width: 24ch; }
.nowrap { white-space: nowrap; }
h1.name { word-break: break-all; }
.muted { color: var(--muted); } .small { font-size: .82rem; }
.attention-list { list-style: none; padding: 0; margin: 0; }
.attention-list li { padding: .35rem .2rem; border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
.attention-list li::before { content: "▲ "; color: var(--warn); }
.attention-list a { color: var(--text); }
.bad { color: var(--bad); }
.empty { color: var(--muted); padding: .6rem 0; }
pre { white-space: pre-wrap; word-break: break-all; background: var(--head); padding: .5rem; margin: 0; border-radius: 6px; max-height: 30rem; overflow: auto; font-size: .85em; }
details > summary { cursor: pointer; color: var(--muted); }
button { font: inherit; padding: .3rem .8rem; margin: 0 .35rem .35rem 0; cursor: pointer; border-radius: 6px; border: 1px solid var(--line); background: var(--panel); color: var(--text); }
button:hover { border-color: var(--accent); }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { color: var(--bad); border-color: var(--bad); }
button.ghost { border-color: transparent; background: transparent; font-size: 1.1rem; padding: .1rem .5rem; margin: 0; }
button.small { font-size: .8rem; padding: .1rem .5rem; margin: 0 .25rem 0 0; }
input[type="search"], input[type="text"] { font: inherit; padding: .3rem .5rem; border: 1px solid var(--line); border-radius: 6px; background: var(--panel); color: var(--text); max-width: 100%; }
.form { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; margin: .3rem 0 .7rem; }
.form label { display: flex; flex-direction: column; font-size: .8rem; color: var(--muted); gap: .15rem; min-width: 0; }
.toast { position: fixed; left: 50%; bottom: 1rem; transform: translateX(-50%); max-width: calc(100vw - 2rem); background: var(--text); color: var(--bg); padding: .6rem 1rem; border-radius: 8px; display: flex; gap: .8rem; align-items: center; box-shadow: 0 4px 16px #0004; }
.toast button { margin: 0; background: transparent; color: inherit; border-color: currentColor; }
.notice { padding: .5rem .8rem; border-radius: 8px; background: var(--warn-bg); color: var(--warn); margin: 0 0 .8rem; overflow-wrap: anywhere; }
.notice.ok { background: var(--ok-bg); color: var(--ok); }
.facts { display: flex; flex-wrap: wrap; gap: .3rem 1.4rem; margin: 0 0 .6rem; }
.facts span { white-space: nowrap; } .facts strong { font-variant-numeric: tabular-nums; }
.row-actions { white-space: nowrap; }
button:focus-visible, a:focus-visible, input:focus-visible, summary:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; }
@media (max-width: 640px) {
  main { padding: .6rem; }
  .top { padding: .5rem .6rem; }
  .stat .value { font-size: 1.3rem; }
  .strip { grid-template-columns: repeat(2, minmax(0, 1fr)); }
  .charts { grid-template-columns: minmax(0, 1fr); }
  /* Tables as cards: each row a block, each cell a line under its column's name, so that nothing that
     matters (an id, a state, a reason, a lag) sits past a sideways scroll. */
  .scroll table, .scroll tbody, .scroll tr, .scroll td { display: block; }
  .scroll thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); }
  .scroll tr { border-bottom: 1px solid var(--line); padding: .35rem 0; }
  .scroll td { border: 0; padding: .1rem .2rem; display: flex; gap: .8rem; justify-content: space-between; align-items: baseline; text-align: right; min-width: 0; }
  .scroll td::before { content: attr(data-label); color: var(--muted); font-size: .78rem; text-align: left; flex: none; }
  .scroll td:not([data-label])::before { content: none; }
  .scroll td > * { min-width: 0; }
  .scroll td.blank { display: none; }
  .scroll td.n { white-space: normal; }
  td .name, .reason { min-width: 0; }
  .reason { text-align: left; }
}
`;
