/* Light or dark: the visitor's choice (remembered in this browser), else the system's. */

const KEY = 'redis-streams-dashboard:theme';

export function applyTheme(): void {
  let chosen: string | null = null;
  try {
    chosen = localStorage.getItem(KEY);
  } catch {
    // Storage refused (a private window's policy): the system's theme.
  }
  const dark = chosen ? chosen === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
  const toggle = document.getElementById('theme');
  toggle?.setAttribute('aria-pressed', String(dark));
  toggle?.setAttribute('title', dark ? 'Dark theme (press for light)' : 'Light theme (press for dark)');
}

export function toggleTheme(): void {
  const dark = document.documentElement.dataset.theme !== 'dark';
  try {
    localStorage.setItem(KEY, dark ? 'dark' : 'light');
  } catch {
    // Not remembered, still applied.
  }
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
  applyTheme();
}
