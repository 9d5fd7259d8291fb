// The validated, defaulted and env-expanded configuration. `loadConfig` (load.ts) is the only
// producer; everything else reads these types and never looks at raw JSON.

/** The client name of sessions that presented no token (stdio, and HTTP without `listen.auth`). */
export const ANONYMOUS_CLIENT = 'anonymous';
/**
 * The client of an upstream's own request (sampling, elicitation, roots) that no host session
 * could take, as metrics and the audit log name it. Not a name a token may have.
 */
export const NO_CLIENT = 'none';

export type TransportKind = 'stdio' | 'http' | 'sse' | 'ws';
export type Sharing = 'shared' | 'session';
export type ResourceNamespacing = 'prefix' | 'passthrough';

export interface GlobList {
  allow: string[];
  deny: string[];
}

/** Allow/deny lists for each kind of item a host can see. */
export interface ItemLists {
  tools: GlobList;
  prompts: GlobList;
  resources: GlobList;
}

interface ServerCommon {
  /** The key under `mcpServers`. */
  name: string;
  /** Tool pinning: a changed or new tool is held until approved (global `pinTools`, or the server's own). */
  pinTools: boolean;
  /**
   * Which revision family to speak to it: `auto` (initialize, and 2026-07-28 when the server
   * refuses that naming it), `modern` (2026-07-28 only), `legacy` (initialize only).
   */
  era: 'auto' | 'modern' | 'legacy';
  /** Prefix for tool and prompt names; `""` means no prefix. Defaults to `name`. */
  prefix: string;
  /** Not started: `"disabled": true` in the file, or `unavailable`. */
  disabled: boolean;
  /**
   * Set when the server's own entry uses a `${VAR}` the environment lacks: the server is
   * disabled (and says why in the log, /status, `check` and the hosts' instructions) instead of
   * failing the whole config. `missing` holds variable names, never values. Absent on a server
   * disabled in the file.
   */
  unavailable?: { missing: string[]; reason: string };
  sharing: Sharing;
  /**
   * Where a shared connection's log messages go: `related` (default) to the session the
   * upstream relates them to, else where its sampling would go (reverse.ts); `broadcast` to
   * every session that may see the server.
   */
  logs: 'related' | 'broadcast';
  /** Per-request timeout for this upstream; falls back to `timeouts.requestMs`. */
  timeoutMs: number;
  /** Match the upstream's own tool and prompt names and URIs (not the public ones). */
  tools: GlobList;
  prompts: GlobList;
  resources: GlobList & { namespace: ResourceNamespacing };
  /** Static roots offered to this upstream (as `roots/list` results). */
  roots: { uri: string; name?: string }[] | undefined;
  restart: { maxRetries: number; backoffMs: number };
}

export interface StdioServerConfig extends ServerCommon {
  transport: 'stdio';
  command: string;
  args: string[];
  env: Record<string, string>;
  /**
   * What the child gets of mcpmux's own environment beyond the minimal set (child-env.ts):
   * false (nothing more), true (everything), or names (`AWS_*` for a prefix).
   */
  inheritEnv: boolean | string[];
  /** Absolute; a relative `cwd` in the file is resolved against the config file's folder. */
  cwd: string | undefined;
}

/**
 * OAuth for a Streamable HTTP server (`mcpmux login`). Without it a server that answers 401
 * still gets a login, with a client registered on the spot; with it, a registered client.
 */
export interface OAuthSettings {
  /**
   * `authorization_code` (default): a person logs in once (`mcpmux login`). `client_credentials`:
   * mcpmux gets tokens itself with the client's secret or private key, no login step.
   * `token_exchange` (RFC 8693): the host's OIDC JWT is exchanged for a token for this server.
   * `jwt_bearer` (Cross-App Access, SEP-990): an ID token is exchanged at the IdP (`idp`) for an
   * ID-JAG, which this server's authorization server takes as a JWT bearer grant.
   */
  grant?: 'authorization_code' | 'client_credentials' | 'token_exchange' | 'jwt_bearer';
  /** A client registered with the authorization server beforehand (else RFC 7591 registration). */
  clientId?: string;
  /** Its secret (`${VAR}`), for a confidential client. */
  clientSecret?: string;
  /** The https URL of this client's Client ID Metadata Document, used as its id where the server takes such ids. */
  clientMetadataUrl?: string;
  /** Scopes to ask for (else the server's challenge, else its `scopes_supported`). */
  scopes?: string[];
  /** The loopback port of the redirect URI (`http://127.0.0.1:<port>/callback`); a registered client needs a fixed one. */
  redirectPort?: number;
  /** client_credentials with private_key_jwt: the client's private key (PEM; use `${VAR}`) and its algorithm. */
  privateKey?: string;
  signingAlgorithm?: 'RS256' | 'ES256';
  /**
   * One login per host client (`listen.auth.tokens`) instead of one for the daemon: `mcpmux login
   * NAME --client C`, and a connection per client carrying only that client's token (isPerClient).
   */
  perClient?: boolean;
  /** token_exchange: the `audience` to ask for (the upstream's name at its authorization server), if it wants one. */
  audience?: string;
  /** token_exchange: the RFC 8707 resource to ask for; default the server's URL. */
  resource?: string;
  /** token_exchange: what the host's JWT is (RFC 8693 token type `urn:ietf:params:oauth:token-type:<this>`); default `access_token`. */
  subjectTokenType?: SubjectTokenType;
  /** token_exchange (required there): the token endpoint the host's JWT is exchanged at. Never discovered: the upstream must not choose where hosts' JWTs go. */
  tokenEndpoint?: string;
  /** jwt_bearer: the identity provider that turns an ID token into an ID-JAG for this server. */
  idp?: IdpSettings;
  /**
   * `mcpmux stdio` only (a person at the screen): when the server needs a login or more scope,
   * mcpmux opens the browser itself (default true). `serve` never opens a browser.
   */
  interactive?: boolean;
  /** How long a host's call waits for that login to land (default 50000 ms, inside the 60 s hosts wait). */
  interactiveWaitMs?: number;
}

/** The token types a host's JWT may be exchanged as (RFC 8693 3). */
export type SubjectTokenType = 'access_token' | 'jwt' | 'id_token';

/** Cross-App Access: the enterprise identity provider's side. */
export interface IdpSettings {
  /** Its issuer URL (its token endpoint is discovered from it when `tokenEndpoint` is absent). */
  issuer: string;
  tokenEndpoint?: string;
  /** mcpmux's client at the IdP, and its secret (`${VAR}`) if it is confidential. */
  clientId: string;
  clientSecret?: string;
  /** The ID token to exchange (`${VAR}`, a secret); absent: the host's OIDC JWT (then the server is per client). */
  idToken?: string;
}

/**
 * How a host's call waits for a login that opens itself in `mcpmux stdio` (the authorization
 * code grant, a server mcpmux may log in to): undefined when the login is a person's `mcpmux login` only.
 */
export function interactiveLogin(s: ServerConfig): { waitMs: number } | undefined {
  if (s.transport !== 'http' || s.oauth?.interactive === false) return undefined;
  if (s.oauth?.grant !== undefined && s.oauth.grant !== 'authorization_code') return undefined;
  // A configured Authorization header is the admin's choice: a 401 is no login matter then.
  if (Object.keys(s.headers).some((h) => h.toLowerCase() === 'authorization')) return undefined;
  return { waitMs: s.oauth?.interactiveWaitMs ?? DEFAULTS.interactiveWaitMs };
}

export interface RemoteServerConfig extends ServerCommon {
  transport: 'http' | 'sse' | 'ws';
  url: string;
  headers: Record<string, string>;
  oauth?: OAuthSettings;
}

export type ServerConfig = StdioServerConfig | RemoteServerConfig;

/**
 * Whether the server's grant takes the host's identity (its OIDC JWT) as input: token_exchange,
 * and jwt_bearer without idp.idToken. Static-token and stdio sessions have none to give.
 */
export function actsForHost(s: ServerConfig): boolean {
  const o = s.transport === 'stdio' ? undefined : s.oauth;
  return o?.grant === 'token_exchange' || (o?.grant === 'jwt_bearer' && o.idp?.idToken === undefined);
}

/**
 * Whether a server gets one connection for all sessions, one per session, or one per host
 * client: what the pool opens, what mcpmux may read ahead of hosts and keep for everyone.
 */
export function scopeOf(c: ServerConfig): 'shared' | 'session' | 'client' {
  // A `session` connection is one session's, hence one client's already: it carries that client's login.
  if (c.sharing === 'session') return 'session';
  return isPerClient(c) ? 'client' : 'shared';
}

/** An upstream whose connection carries one host client's identity: opened per client, shared only by that client's sessions. */
export function isPerClient(s: ServerConfig): boolean {
  const o = s.transport === 'stdio' ? undefined : s.oauth;
  if (!o) return false;
  // A grant that acts for the host (its JWT is the subject) has one identity per client too.
  const grant = o.grant as string | undefined;
  return o.perClient === true || grant === 'token_exchange' || (grant === 'jwt_bearer' && !(o as { idp?: { idToken?: string } }).idp?.idToken);
}

export interface ClientToken {
  client: string;
  /** Name of the environment variable holding the token (never the token itself in the file). */
  tokenEnv: string;
  /** The token's value, read from `tokenEnv` at load time. A secret. */
  token: string;
  /** May take operator actions over HTTP (restart an upstream); other clients get 403. */
  admin: boolean;
  /** The toolset its sessions get unless the URL names another (`?toolset=`). */
  toolset?: string;
}

/**
 * `listen.auth.oidc`: hosts that present a JWT from the organisation's identity provider
 * (transport/http/oidc.ts checks it). Applies on reload, like the tokens.
 */
export interface OidcSettings {
  /** The `iss` the JWTs carry (https, or http on loopback). */
  issuer: string;
  /** Accepted `aud` values (one must match). */
  audience: string[];
  /** The issuer's JWKS; undefined: discovered (`jwks_uri` of `<issuer>/.well-known/openid-configuration`). */
  jwksUrl?: string;
  /** The claim (a string) that names the host. Default `sub`. */
  clientClaim: string;
  /** Claim value -> a client of `listen.auth.tokens`. Other values are `oidc:<value>` (see settingsClient). */
  clients: Record<string, string>;
  /** The JWS algorithms accepted: asymmetric only. */
  algorithms: string[];
}

/** Every asymmetric JWS algorithm jose verifies: `none` and the HMAC ones (a shared secret, or a public key misused as one) never. */
export const OIDC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const;

/**
 * The client whose settings (policy.clients, rate limits) an unmapped OIDC host gets, and the
 * only name such hosts have in metrics labels. Their own client name is `oidc:<claim value>`.
 */
export const OIDC_CLIENT = 'oidc';
const OIDC_PREFIX = `${OIDC_CLIENT}:`;

/** The client name of a host whose claim value `listen.auth.oidc.clients` does not map. */
export function oidcClient(claimValue: string): string {
  return OIDC_PREFIX + claimValue;
}

/**
 * The name a client's settings and metrics labels go under: `oidc` for every unmapped OIDC host
 * (`oidc:<value>`), else the client itself. No token client may be named `oidc:...` (load.ts).
 */
export function settingsClient(client: string): string {
  return client.startsWith(OIDC_PREFIX) ? OIDC_CLIENT : client;
}

/**
 * How a session's tools are offered (src/surface/README in docs/surface.md): `all` lists every
 * tool; `search` lists a few plus the search and call meta-tools; `auto` picks per session.
 */
export type SurfaceMode = 'auto' | 'all' | 'search';

export interface SurfaceConfig {
  mode: SurfaceMode;
  /** auto: listed directly while a session's visible tools are at most this many... */
  maxDirectTools: number;
  /** ...and their definitions cost at most this many tokens (estimated). */
  maxDirectTokens: number;
  /** Globs of clientInfo.name: hosts that search tools themselves get `all` under auto. */
  nativeSearchClients: string[];
  /** Globs of public tool names listed in search mode too. */
  alwaysVisible: string[];
  /** search_tools results when the call names no limit. */
  searchLimit: number;
  searchToolName: string;
  callToolName: string;
}

/** A named subset of the tools (globs of public names), with its own surface mode if it says one. */
export interface ToolsetConfig {
  tools: string[];
  surface?: SurfaceMode;
}

export type RateLimitKey = 'client' | 'server' | 'tool';

export interface RateLimitRule {
  /** Globs: the client (token identity or `anonymous`), the server (config name), the upstream's own tool name. */
  client: string;
  server: string;
  tool: string;
  perMinute: number;
  burst: number;
  /** Which of client, server and tool get a bucket each; the others share one. Default all three. */
  per: RateLimitKey[];
}

export interface Config {
  /** Absolute path of the file this came from (undefined when built in memory). */
  path: string | undefined;
  /** Enabled and disabled servers, in file order. */
  servers: ServerConfig[];
  namespace: { separator: string; maxNameLength: number };
  listen: {
    host: string;
    port: number;
    allowedOrigins: string[];
    auth: { tokens: ClientToken[]; oidc?: OidcSettings };
    /** A separate listener for the operator routes (0 or undefined: served on `port`). */
    adminPort?: number;
    /** The address the admin listener binds to (loopback by default, whatever `host` is). */
    adminHost: string;
  };
  /** Global lists match public names and host-visible URIs; so do the per-client ones. */
  policy: ItemLists & { clients: Record<string, ItemLists> };
  surface: SurfaceConfig;
  toolsets: Record<string, ToolsetConfig>;
  rateLimits: RateLimitRule[];
  audit: {
    path: string | undefined;
    arguments: 'none' | 'redacted' | 'full';
    /** `full` only: paths into the arguments whose values are replaced (`a.b`, `*` for any key). */
    redact: string[];
  };
  metrics: {
    /** Add a `tool` label (public tool name) to request metrics, for at most `toolLabelLimit` tools. */
    toolLabel: boolean;
    toolLabelLimit: number;
  };
  /** OpenTelemetry traces (observe/tracing.ts); undefined: off, and no OpenTelemetry module is loaded. Read at start only. */
  telemetry: TelemetryConfig | undefined;
  /**
   * startupMs: how long an upstream may take to start and initialize; startupWaitMs: how long a
   * host's initialize waits for them (later ones join with list_changed).
   */
  timeouts: { requestMs: number; maxMs: number; startupMs: number; startupWaitMs: number };
  limits: { maxMessageBytes: number; maxInFlightPerSession: number; maxSessions: number; maxSessionsPerClient: number; maxSessionUpstreams: number; maxRateLimitKeys: number };
  /** State shared with other daemons through Redis (store/); undefined: this process alone. */
  store: StoreConfig | undefined;
  /** This daemon is one of several behind a load balancer (cluster/); needs `store`. */
  cluster: ClusterConfig | undefined;
  logLevel: string | undefined;
  /**
   * The values loggers and the audit log scrub from every line: `${VAR}` values that are secret
   * (secrecy.ts: the variable's name, where it is used, its shape, or the top-level `"secrets"`
   * list), every header value, secret-named `env` values, secret-looking arguments, OAuth
   * secrets and client tokens. Not every `${VAR}`: folders and words stay readable.
   */
  secrets: string[];
}

export interface StoreConfig {
  redis: { url: string; keyPrefix: string };
  /** closed: what needs the store fails while it is down; open: limits skipped, pins and logins as last seen. */
  onError: 'closed' | 'open';
  /** The variable named by `secretEnv` and its value: the key logins are encrypted with (absent: logins stay in files). */
  secretEnv?: string;
  secret?: string;
}

export interface ClusterConfig {
  /** How the other daemons reach this one (origin only, no trailing slash). */
  advertiseUrl: string;
  secretEnv: string;
  /** The shared secret's value: authenticates forwarding, signs requestState. */
  secret: string;
  drainMs: number;
}

/** One problem in a config file, located by JSON path (`/mcpServers/fs/args/0`). */
export interface ConfigIssue {
  path: string;
  message: string;
}

export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly issues: ConfigIssue[],
  ) {
    super(
      `invalid config ${file}:\n` + issues.map((i) => `  ${i.path || '/'}: ${i.message}`).join('\n'),
    );
    this.name = 'ConfigError';
  }
}

export const DEFAULTS = {
  separator: '__',
  maxNameLength: 64,
  host: '127.0.0.1',
  port: 7330,
  adminHost: '127.0.0.1',
  requestMs: 60_000,
  maxMs: 600_000,
  startupMs: 10_000,
  startupWaitMs: 3000,
  maxMessageBytes: 16 * 1024 * 1024,
  maxInFlightPerSession: 4096,
  maxSessions: 1024,
  maxSessionsPerClient: 256,
  maxSessionUpstreams: 128,
  maxRateLimitKeys: 100_000,
  toolLabelLimit: 200,
  restartMaxRetries: 5,
  restartBackoffMs: 500,
  interactiveWaitMs: 50_000,
  surface: {
    mode: 'auto',
    maxDirectTools: 40,
    maxDirectTokens: 15_000,
    nativeSearchClients: ['claude-code', 'copilot*'],
    alwaysVisible: [],
    searchLimit: 8,
    searchToolName: 'search_tools',
    callToolName: 'call_tool',
  },
} as const;

/**
 * Traces are on (`telemetry.otlp` in the config, or OTEL_TRACES_EXPORTER=otlp). What the config
 * leaves out, the standard OTEL_EXPORTER_OTLP_* variables decide (the exporter reads them).
 */
export interface TelemetryConfig {
  /** The collector's OTLP/HTTP base URL (spans go to `<endpoint>/v1/traces`); undefined: the variables', else http://localhost:4318. */
  endpoint: string | undefined;
  /** Sent with every export; secrets (scrubbed from every log line). */
  headers: Record<string, string>;
  /** Share of new traces recorded (0..1); a host's sampled flag decides for the traces it starts. */
  sampleRatio: number;
}
