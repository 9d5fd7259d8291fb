// Types of node22.mjs (a plain script, so that it runs before anything is built).
export const NODE22_VERSION: string;
export const NODE22_MIN: [number, number];
export const NODE22_DIR: string;
export const NODE22_ERROR: string;
export const NODE22_BIN: string;
export const NODE22_PLATFORM: string;
export function newEnough(version?: string): boolean;
export function lastError(): string | undefined;
