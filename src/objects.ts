// The one test for "a JSON object": not null, not an array. Config files, host config files and
// MCP payloads all arrive as parsed JSON whose shape is checked before it is read.

/** Whether `v` is a plain JSON object (a record of keys), as opposed to null, an array or a primitive. */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
