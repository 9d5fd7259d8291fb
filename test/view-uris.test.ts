// The `ui://` URI form (MCP Apps views): it keeps the scheme, routes back to its server, and
// is used wherever a URI leaves mcpmux — here tool results' resource links and embedded
// resources, and tools' `_meta` (the lists and reads are driven end to end in apps.e2e).

import { describe, expect, it } from 'vitest';
import { toolViewUris } from '../src/protocol/apps.js';
import { unwrapUri, wrapToolView, wrapUri } from '../src/router/naming.js';
import { rewriteToolResult } from '../src/router/rewrite.js';

describe('view URIs', () => {
  it('wrap keeps ui:// and unwrap gives back the server and the original, for every other scheme too', () => {
    for (const [server, uri, shown] of [
      ['basic', 'ui://get-time/mcp-app.html', 'ui://basic+get-time/mcp-app.html'],
      ['a.b-c_1', 'ui://x+y/z', 'ui://a.b-c_1+x+y/z'],
      ['fs', 'file:///a+b', 'fs+file:///a+b'],
    ] as const) {
      expect(wrapUri(server, uri)).toBe(shown);
      expect(unwrapUri(shown)).toEqual({ server, rest: uri });
    }
    // A view's own URI is not a wrapped one (no `+`, or what precedes it is no server name).
    expect(unwrapUri('ui://get-time/mcp-app.html')).toBeUndefined();
    expect(unwrapUri('ui://a/b+c')).toBeUndefined();
  });

  it("a tool's view URIs (both keys) are namespaced on a copy; the other _meta.ui fields stay", () => {
    const tool = { name: 't', _meta: { ui: { resourceUri: 'ui://v/x.html', csp: { connectDomains: ['https://a'] }, visibility: ['model', 'app'] }, 'ui/resourceUri': 'ui://v/x.html', other: 1 } };
    const before = structuredClone(tool);
    expect(toolViewUris(tool)).toEqual(['ui://v/x.html', 'ui://v/x.html']);
    expect(wrapToolView(tool, 's')).toEqual({
      name: 't',
      _meta: { ui: { resourceUri: 'ui://s+v/x.html', csp: { connectDomains: ['https://a'] }, visibility: ['model', 'app'] }, 'ui/resourceUri': 'ui://s+v/x.html', other: 1 },
    });
    expect(tool).toEqual(before);
    const plain = { name: 'p', _meta: { ui: { visibility: ['app'] } } };
    expect(wrapToolView(plain, 's')).toBe(plain);
  });

  it('resource links and embedded resources in a tool result keep ui:// when namespaced', () => {
    const result = {
      content: [
        { type: 'resource_link', uri: 'ui://v/x.html', name: 'view' },
        { type: 'resource', resource: { uri: 'ui://v/x.html', mimeType: 'text/html;profile=mcp-app', text: '<p>' } },
      ],
    };
    const out = rewriteToolResult(result, 's') as { content: Array<{ uri?: string; resource?: { uri: string } }> };
    expect(out.content[0]!.uri).toBe('ui://s+v/x.html');
    expect(out.content[1]!.resource!.uri).toBe('ui://s+v/x.html');
  });
});
