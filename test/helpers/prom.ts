// Reads the Prometheus text exposition format strictly enough to prove `/metrics` is valid:
// every line is a comment (# HELP / # TYPE) or a sample `name{label="value",...} number`.

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
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status}`);
  const text = await res.text();
  return { samples: parseProm(text), text, contentType: res.headers.get('content-type') };
}
