// A deliberately plain tool search with the same API as src/surface/search-index.ts, so the
// recall harness runs (and shows a floor to beat) before and beside the real engine.
// Scoring: the query's distinct words that occur anywhere in the tool's text (name, title,
// description, parameter names and descriptions, server name), each weighted by its inverse
// document frequency, so "issue" counts for less than "kanban". No stemming, no field weights,
// no phrase or prefix matching: anything the real engine does better shows up as recall.

const STOP = new Set(
  'a an and are as at be by can do does for from get give how i in is it its me my of on or please show some than that the their them then there this to up use want we what when where which who will with would you your'.split(
    ' ',
  ),
);

/** Splits `snake_case`, `camelCase`, `kebab-case` and prose into lower-case words. */
export function words(text) {
  return String(text ?? '')
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w && !STOP.has(w));
}

function schemaText(schema, out = [], depth = 0) {
  if (!schema || typeof schema !== 'object' || depth > 4) return out;
  const props = schema.properties;
  if (props && typeof props === 'object') {
    for (const [k, v] of Object.entries(props)) {
      out.push(k);
      if (v && typeof v === 'object') {
        if (typeof v.description === 'string') out.push(v.description);
        schemaText(v, out, depth + 1);
        if (v.items) schemaText(v.items, out, depth + 1);
      }
    }
  }
  return out;
}

export class ToolIndex {
  #docs;
  #idf;
  constructor(docs, idf) {
    this.#docs = docs;
    this.#idf = idf;
  }

  static build(tools) {
    const docs = tools.map((tool) => {
      const text = [tool.name, tool.server, tool.title, tool.description, ...schemaText(tool.inputSchema)].join(' ');
      return { tool, terms: new Set(words(text)) };
    });
    const df = new Map();
    for (const d of docs) for (const t of d.terms) df.set(t, (df.get(t) ?? 0) + 1);
    const idf = new Map();
    for (const [t, n] of df) idf.set(t, Math.log(1 + docs.length / n));
    return new ToolIndex(docs, idf);
  }

  get size() {
    return this.#docs.length;
  }

  search(query, opts = {}) {
    const limit = Math.max(0, Math.min(opts.limit ?? 8, 1000));
    const q = [...new Set(words(String(query).slice(0, 10_000)))];
    if (q.length === 0 || limit === 0) return [];
    const hits = [];
    for (const d of this.#docs) {
      if (opts.server !== undefined && d.tool.server !== opts.server) continue;
      let score = 0;
      for (const t of q) if (d.terms.has(t)) score += this.#idf.get(t) ?? 0;
      if (score > 0) hits.push({ tool: d.tool, score });
    }
    hits.sort((a, b) => b.score - a.score || (a.tool.name < b.tool.name ? -1 : 1));
    return hits.slice(0, limit);
  }
}
