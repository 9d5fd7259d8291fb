// Protocol revisions mcpmux speaks, newest first. Each side of mcpmux negotiates separately.

export const SUPPORTED_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'] as const;
export type ProtocolVersion = (typeof SUPPORTED_VERSIONS)[number];
export const LATEST_VERSION: ProtocolVersion = SUPPORTED_VERSIONS[0];

export function isSupportedVersion(v: unknown): v is ProtocolVersion {
  return typeof v === 'string' && (SUPPORTED_VERSIONS as readonly string[]).includes(v);
}

/** Server side of the handshake: echo the client's version if we know it, else offer our latest. */
export function negotiateVersion(requested: unknown): ProtocolVersion {
  return isSupportedVersion(requested) ? requested : LATEST_VERSION;
}

/** Revisions compare as dates, so plain string comparison orders them. */
export function versionAtLeast(v: string, min: ProtocolVersion): boolean {
  return v >= min;
}
