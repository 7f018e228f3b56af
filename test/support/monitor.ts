import { connect } from 'node:net';

/** One command as MONITOR shows it: its arguments (unescaped) and who sent it (`127.0.0.1:port`, or `lua` in a script). */
export interface MonitoredCommand {
  args: string[];
  source: string;
}

/**
 * MONITOR of the server on `port`, on a socket of its own, its lines parsed here. Not ioredis' `monitor()`: under
 * load the first monitored line can come in the same read as MONITOR's OK, before ioredis has switched the
 * connection to monitoring, and it fails with "Command queue state error" (seen in CI). Resolves once MONITOR is on.
 */
export async function monitorCommands(port: number, onCommand: (command: MonitoredCommand) => void): Promise<{ close: () => void }> {
  const socket = connect(port, '127.0.0.1');
  let buffered = '';
  let on = false;
  await new Promise<void>((resolve, reject) => {
    // Refused or unreachable: the socket goes too.
    const fail = (err: Error) => {
      socket.destroy();
      reject(err);
    };
    socket.once('error', fail);
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      let end: number;
      while ((end = buffered.indexOf('\r\n')) >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (line.startsWith('-')) fail(new Error(`MONITOR refused: ${line.slice(1)}`));
        else if (!on) {
          on = line === '+OK';
          if (on) resolve();
        } else {
          const command = parseMonitorLine(line);
          if (command) onCommand(command);
        }
      }
    });
    socket.write('MONITOR\r\n');
  });
  return { close: () => socket.destroy() };
}

/** `+1796585390.756393 [0 127.0.0.1:53756] "XACK" "k" …`: Redis quotes each argument as sdscatrepr writes it. */
function parseMonitorLine(line: string): MonitoredCommand | undefined {
  const head = /^\+\d+\.\d+ \[\d+ ([^\]]*)\] /.exec(line);
  if (!head) return undefined;
  const args = [...line.slice(head[0].length).matchAll(/"((?:\\.|[^"\\])*)"/g)].map((m) => unescapeRepr(m[1]!));
  return { args, source: head[1]! };
}

const ESCAPED: Record<string, number> = { n: 10, r: 13, t: 9, a: 7, b: 8, '\\': 92, '"': 34 };

/** sdscatrepr's escapes undone (the line was read as latin1, one char a byte); the bytes read back as UTF-8. */
function unescapeRepr(text: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== '\\') bytes.push(c.charCodeAt(0));
    else if (text[i + 1] === 'x') {
      bytes.push(parseInt(text.slice(i + 2, i + 4), 16));
      i += 3;
    } else {
      bytes.push(ESCAPED[text[i + 1]!] ?? text.charCodeAt(i + 1));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString('utf8');
}
