// The search answer's shape and budget (src/surface/meta-tools.ts), on tools big enough to pass it.

import { describe, expect, it } from 'vitest';
import { searchAnswer, SEARCH_RESULT_MAX_TOKENS, type FoundTool } from '../src/surface/meta-tools.js';
import { countTokens } from '../src/surface/tokens.js';

/** A tool with a long description and schema: about 1 000 tokens. */
function bigTool(i: number): FoundTool {
  const words = Array.from({ length: 300 }, (_, k) => `word${(i * 7 + k) % 97}`).join(' ');
  return {
    name: `srv__tool_${i}`,
    server: 'srv',
    tool: { name: `tool_${i}`, description: `Tool ${i}. ${words}`, inputSchema: { type: 'object', properties: { a: { type: 'string', description: words.slice(0, 400) } }, required: ['a'] } },
  };
}

describe('searchAnswer', () => {
  it('stops adding matches before the budget (counted exactly), says how many it left out, and keeps both renderings in step', async () => {
    const found = Array.from({ length: 30 }, (_, i) => bigTool(i));
    const answer = searchAnswer('a query', found, 400);
    const tools = (answer.structuredContent as any).tools as any[];
    expect(tools.length).toBeGreaterThan(1);
    expect(tools.length).toBeLessThan(30);
    expect(tools.map((t) => t.name)).toEqual(found.slice(0, tools.length).map((f) => f.name));
    const text = (answer.content as any[])[0].text as string;
    const exact = (await countTokens(text)) + (await countTokens(JSON.stringify(answer.structuredContent)));
    expect(exact).toBeLessThanOrEqual(SEARCH_RESULT_MAX_TOKENS);
    expect(text).toMatch(new RegExp(`^${tools.length} of 400 tools match "a query", best first \\(${30 - tools.length} more left out to keep this short`));
    for (const t of tools) expect(text).toContain(`${t.name} (srv): Tool`);
  });

  it('always gives the first match whole, even past the budget; and says so when nothing matched', () => {
    const huge: FoundTool = { name: 's__huge', server: 's', tool: { name: 'huge', description: 'x '.repeat(40_000), inputSchema: { type: 'object' } } };
    const one = searchAnswer('q', [huge, bigTool(1)], 2);
    expect((one.structuredContent as any).tools.map((t: any) => t.name)).toEqual(['s__huge']);
    expect((one.structuredContent as any).tools[0].description).toBe(huge.tool.description);
    const none = searchAnswer('q', [], 2);
    expect(none.structuredContent).toEqual({ tools: [] });
    expect((none.content as any[])[0].text).toBe('No tool matches "q" among 2 tools. Try other words, or fewer.');
  });
});
