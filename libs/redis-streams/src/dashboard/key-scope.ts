/** Redis' glob (`*`, `?`, `[...]`, `\x`) as a RegExp, so that `match` scopes what the API shows and acts on, not only what SCAN lists. */
export function globToRegExp(glob: string): RegExp {
  let out = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*') out += '[\\s\\S]*';
    else if (c === '?') out += '[\\s\\S]';
    else if (c === '\\' && i + 1 < glob.length) out += escape(glob[++i]!);
    else if (c === '[') {
      const end = glob.indexOf(']', i + 2);
      if (end < 0) out += '\\[';
      else {
        let set = glob.slice(i + 1, end);
        const negate = set.startsWith('^');
        if (negate) set = set.slice(1);
        out += `[${negate ? '^' : ''}${set.replace(/[\]\\]/g, '\\$&')}]`;
        i = end;
      }
    } else out += escape(c);
  }
  return new RegExp(`^${out}$`);
}

const escape = (c: string): string => c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
