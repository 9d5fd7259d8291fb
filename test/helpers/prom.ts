// Reads the Prometheus text exposition format strictly enough to prove `/metrics` is valid:
// every line is a comment (# HELP / # TYPE) or a sample `name{label="value",...} number`.

import { get as httpGet } from 'node:http';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
// Values are read as Go's ParseFloat reads them (Prometheus's parser): NaN and Inf in any case.
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (-?[0-9.eE+-]+|[Nn][Aa][Nn]|[+-]?[Ii][Nn][Ff])$`);
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;

/** Every sample; throws on any line that is not valid exposition text. */
export function parseProm(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      if (!/^# (HELP|TYPE) /.test(line)) throw new Error(`bad comment line: ${line}`);
      continue;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`bad sample line: ${line}`);
    const labels: Record<string, string> = {};
    const body = m[2] ?? '';
    LABEL.lastIndex = 0;
    while (LABEL.lastIndex < body.length) {
      const at = LABEL.lastIndex;
      const l = LABEL.exec(body);
      if (!l || l.index !== at) throw new Error(`bad labels in: ${line}`);
      labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
      if (l[3] === '') break;
    }
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The sum of the samples named `name` whose labels include `match`. */
export function total(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((n, s) => n + s.value, 0);
}

/** GET `url` and parse it. */
export async function scrape(url: string): Promise<{ samples: Sample[]; text: string; contentType: string | null }> {
  // A connection of its own (agent: false), as Prometheus opens one: fetch's pooled keep-alive
  // socket may be one the daemon closed idle while this busy test process was late to notice,
  // which fails the GET with "other side closed" (seen after 5 000 calls in the full suite).
  const { status, text, contentType } = await new Promise<{ status: number; text: string; contentType: string | null }>((resolve, reject) => {
    const req = httpGet(url, { agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: body, contentType: res.headers['content-type'] ?? null }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  if (status !== 200) throw new Error(`GET ${url}: ${status}`);
  return { samples: parseProm(text), text, contentType };
}
