// Public API of the config module.
export { loadConfig, parseConfig, SCHEMA_URL } from './load.js';
export { expandEnv, jsonPointer, pointerSegment, type ExpandResult } from './expand.js';
export * from './types.js';
