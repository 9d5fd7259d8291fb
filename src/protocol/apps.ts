// MCP Apps (the ui extension) as mcpmux reads it: which views a tool opens.

/** The view a tool opens (MCP Apps): `_meta.ui.resourceUri`, and the deprecated `_meta["ui/resourceUri"]`. */
export function toolViewUris(tool: { _meta?: unknown }): string[] {
  const meta = tool._meta as Record<string, unknown> | undefined;
  const out: string[] = [];
  const ui = meta?.ui as Record<string, unknown> | undefined;
  if (typeof ui?.resourceUri === 'string') out.push(ui.resourceUri);
  if (typeof meta?.['ui/resourceUri'] === 'string') out.push(meta['ui/resourceUri'] as string);
  return out;
}
