// Reads, expands, validates and defaults a config file into a `Config`.
//
// Pipeline: read -> JSONC (JSON with comments and trailing commas, ../jsonc.ts) -> `${VAR}`
// expansion -> JSON Schema (ajv, every error) -> semantic checks the schema cannot express ->
// defaults. Every problem found along the way is collected and thrown together as one
// `ConfigError`, each issue located by its JSON path.

import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ErrorObject, Options, ValidateFunction } from 'ajv';
import { keptValidator } from './kept-validator.js';
import { expandEnv, jsonPointer, pointerSegment } from './expand.js';
import { isObject } from '../objects.js';
import { JsoncError, parseJsonc } from '../jsonc.js';
import { secretArgs, urlSecrets } from './secret-args.js';
import { secretValues, secretVariable, tokenLike } from './secrecy.js';
import { nearest, unknownToolset } from './suggest.js';
import { selfReferenceIssues } from './self-reference.js';
import {
  ANONYMOUS_CLIENT,
  NO_CLIENT,
  OIDC_ALGORITHMS,
  OIDC_CLIENT,
  ConfigError,
  DEFAULTS,
  type ClientToken,
  type ClusterConfig,
  type StoreConfig,
  type Config,
  type ConfigIssue,
  type GlobList,
  type ItemLists,
  type OAuthSettings,
  type OidcSettings,
  type RateLimitRule,
  type ServerConfig,
  type SurfaceConfig,
  type TelemetryConfig,
  type ToolsetConfig,
  type TransportKind,
} from './types.js';

/** Where the published schema lives; src/config and dist/config are both two levels down. */
export const SCHEMA_URL = new URL('../../schema/config.schema.json', import.meta.url);

/**
 * `${MCPMUX_HOME}`: the mcpmux package's own folder (the clone, or where npm installed it), so a
 * config can name files that come with mcpmux, like the example's servers, from any folder.
 * Available in every config; a value in the environment wins. A path, not a secret.
 */
export const MCPMUX_HOME = fileURLToPath(new URL('../..', import.meta.url)).replace(/[\\/]$/, '');

// verbose: errors carry the offending value, so type errors can say what they got, and the schema
// they failed, so an unknown key can be matched against the keys allowed beside it.
const AJV_OPTIONS: Options = { allErrors: true, verbose: true, allowUnionTypes: true };
// Kept compiled between starts (kept-validator.ts).
const { validate } = keptValidator(readFileSync(SCHEMA_URL, 'utf8'), AJV_OPTIONS);

// ---- the file's shape once the schema has accepted it (everything optional) ----

interface RawGlobList { allow?: string[]; deny?: string[] }
/** A client's own lists: `allow`/`deny` are its tool lists (the original shape), beside prompts and resources. */
interface RawClientPolicy extends RawGlobList { prompts?: RawGlobList; resources?: RawGlobList }
interface RawServer {
  command?: string; args?: string[]; env?: Record<string, string>; cwd?: string; inheritEnv?: boolean | string[];
  url?: string; headers?: Record<string, string>;
  type?: string; transport?: string; prefix?: string; disabled?: boolean;
  sharing?: 'shared' | 'session'; logs?: 'related' | 'broadcast'; timeoutMs?: number; tools?: RawGlobList; prompts?: RawGlobList;
  resources?: RawGlobList & { namespace?: 'prefix' | 'passthrough' };
  roots?: { uri: string; name?: string }[];
  restart?: { maxRetries?: number; backoffMs?: number };
  pinTools?: boolean;
  era?: 'auto' | 'modern' | 'legacy';
  oauth?: OAuthSettings;
}
interface RawConfig {
  mcpServers?: Record<string, RawServer>;
  namespace?: { separator?: string; maxNameLength?: number };
  listen?: {
    host?: string; port?: number; allowedOrigins?: string[]; adminPort?: number; adminHost?: string;
    auth?: {
      tokens?: { client: string; tokenEnv: string; admin?: boolean; toolset?: string }[];
      oidc?: { issuer: string; audience: string | string[]; jwksUrl?: string; clientClaim?: string; clients?: Record<string, string>; algorithms?: string[] };
    };
  };
  policy?: { tools?: RawGlobList; prompts?: RawGlobList; resources?: RawGlobList; clients?: Record<string, RawClientPolicy> };
  surface?: Partial<SurfaceConfig>;
  toolsets?: Record<string, ToolsetConfig>;
  rateLimits?: { client?: string; server?: string; tool?: string; perMinute: number; burst?: number; per?: ('client' | 'server' | 'tool')[] }[];
  audit?: { path?: string; arguments?: 'redacted' | 'full' | 'none'; redact?: string[] };
  metrics?: { toolLabel?: boolean; toolLabelLimit?: number };
  telemetry?: { otlp?: { endpoint?: string; headers?: Record<string, string> }; sampleRatio?: number };
  timeouts?: { requestMs?: number; maxMs?: number; startupMs?: number; startupWaitMs?: number };
  limits?: { maxMessageBytes?: number; maxInFlightPerSession?: number; maxSessions?: number; maxSessionsPerClient?: number; maxSessionUpstreams?: number; maxRateLimitKeys?: number };
  logLevel?: string;
  pinTools?: boolean;
  secrets?: string[];
  store?: { redis?: { url?: string; keyPrefix?: string }; onError?: 'closed' | 'open'; secretEnv?: string };
  cluster?: { advertiseUrl?: string; secretEnv?: string; drainMs?: number };
}

/** Reads and loads a config file. Throws `ConfigError` with every issue found. */
export async function loadConfig(file: string, env: NodeJS.ProcessEnv = process.env): Promise<Config> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why = e.code === 'ENOENT' ? 'file not found' : e.code === 'EISDIR' ? 'is a directory' : e.message;
    throw new ConfigError(file, [{ path: '/', message: `cannot read config file: ${why}` }]);
  }
  return parseConfig(text, file, env);
}

/** Parses config text; `file` names it in errors and anchors relative paths. */
export function parseConfig(text: string, file: string, env: NodeJS.ProcessEnv): Config {
  let json: unknown;
  try {
    json = parseJsonc(text); // comments and trailing commas allowed; a BOM ignored
  } catch (err) {
    if (!(err instanceof JsoncError)) throw err;
    throw new ConfigError(file, [{ path: '/', message: err.message }]);
  }

  // `"secrets"` holds variable names, not values: it is not expanded (a `${X}` in it is refused
  // by the schema as a name).
  const named = isObject(json) ? json.secrets : undefined;
  // `${MCPMUX_HOME}`: mcpmux's own folder, unless the environment says otherwise (a path, not a secret).
  const expanded = expandEnv(isObject(json) ? { ...json, secrets: undefined } : json, { ...env, MCPMUX_HOME: env.MCPMUX_HOME ?? MCPMUX_HOME });
  if (isObject(expanded.value)) {
    if (named === undefined) delete expanded.value.secrets;
    else expanded.value.secrets = named;
  }
  // Which values from the environment are secrets (secrecy.ts); the rest may be quoted.
  const names = new Set(Array.isArray(named) ? named.filter((n): n is string => typeof n === 'string') : []);
  const fromEnv = secretValues(expanded.used, names);
  // A missing variable expands to "", which the schema may then call empty or malformed: that
  // is the same problem, reported once (as the missing variable).
  const missing = new Set(expanded.missing.map((m) => m.path));
  const consequence = (e: ErrorObject) =>
    missing.has(e.instancePath) && ['minLength', 'pattern', 'enum'].includes(e.keyword);
  const schemaIssues = validate(expanded.value)
    ? []
    : (validate.errors ?? [])
        // ajv reports a bad server name twice (propertyNames + its inner pattern); keep the first.
        .filter((e) => e.propertyName === undefined && !consequence(e))
        .map((e) => toIssue(e, fromEnv));
  // Semantic checks only look at parts the schema accepted, so they can trust the shapes and do
  // not repeat a problem the schema already reported.
  const clean = (p: string) => !schemaIssues.some((i) => i.path === p || i.path.startsWith(p + '/'));
  // A variable missing from one server's own entry disables that server alone (a desktop host
  // keeps the others); missing anywhere else, it is a config error as before.
  const local = expanded.missing.filter((m) => serverPointer(m.path) !== undefined);
  const localPaths = new Set(local.map((m) => m.path));
  const unavailable = new Map<string, string[]>(); // server pointer -> missing names, in file order
  for (const m of local) {
    const list = unavailable.get(serverPointer(m.path)!) ?? [];
    if (!list.includes(m.name)) list.push(m.name);
    unavailable.set(serverPointer(m.path)!, list);
  }
  const fatal = expanded.issues.filter((i) => !localPaths.has(i.path));
  if (!clean('/')) throw new ConfigError(file, [...fatal, ...schemaIssues]); // the root is not an object (so no values)

  const semantic: ConfigIssue[] = [];
  const config = build(expanded.value as RawConfig, path.resolve(file), env, { clean, missing, unavailable }, semantic);
  // What an empty expansion makes of a value (a "" type, say) is the missing variable again.
  const issues = [...fatal, ...schemaIssues, ...semantic.filter((i) => !missing.has(i.path))];
  // An upstream that would run mcpmux on this same config starts mcpmux without end.
  issues.push(...selfReferenceIssues(config, env));
  if (issues.length > 0) {
    // A server that is broken anyway: its missing variables are part of what to fix.
    const broken = (m: { path: string }) => {
      const at = serverPointer(m.path)!;
      return issues.some((i) => i.path === at || i.path.startsWith(`${at}/`));
    };
    const related = expanded.issues.filter((i) => localPaths.has(i.path) && broken(i));
    throw new ConfigError(file, [...related, ...issues].map((i) => ({ ...i, message: scrub(i.message, fromEnv) })));
  }
  config.secrets = collectSecrets(config, fromEnv, names);
  return config;
}

/** `/mcpServers/NAME` for a path inside a server's entry (`/mcpServers/NAME/args/0`), else undefined. */
function serverPointer(p: string): string | undefined {
  return /^\/mcpServers\/[^/]+(?=\/)/.exec(p)?.[0];
}

/** "environment variable A is not set", "environment variables A and B are not set". */
export function missingReason(names: readonly string[]): string {
  if (names.length === 1) return `environment variable ${names[0]} is not set`;
  return `environment variables ${names.slice(0, -1).join(', ')} and ${names.at(-1)} are not set`;
}

// ---- ajv errors -> issues ----

function toIssue(e: ErrorObject, secrets: string[]): ConfigIssue {
  const at = e.instancePath || '/';
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'additionalProperties': {
      const key = String(p.additionalProperty);
      // verbose: the schema object that lists the keys allowed here.
      const known = Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {});
      const meant = nearest(key, known);
      return {
        path: `${e.instancePath}/${pointerSegment(key)}`,
        message: `unknown key ${JSON.stringify(key)}${meant === undefined ? '' : ` (did you mean ${JSON.stringify(meant)}?)`}`,
      };
    }
    case 'required': {
      const key = String(p.missingProperty);
      return { path: `${e.instancePath}/${pointerSegment(key)}`, message: `missing required key ${JSON.stringify(key)}` };
    }
    case 'propertyNames': {
      // Server names and toolset names.
      const key = String(p.propertyName);
      if (e.instancePath === '/listen/auth/oidc/clients') {
        return { path: `${e.instancePath}/${pointerSegment(key)}`, message: 'a claim value is 1 to 256 visible ASCII characters (no spaces): other values are refused at sign-in' };
      }
      const toolset = e.instancePath === '/toolsets';
      return {
        path: `${e.instancePath}/${pointerSegment(key)}`,
        message: `invalid ${toolset ? 'toolset' : 'server'} name ${JSON.stringify(key)}: use only letters, digits, "_", "." and "-"${toolset ? ' (at most 64)' : ''}`,
      };
    }
    case 'minItems':
      return { path: at, message: `must list at least ${String(p.limit)} item${p.limit === 1 ? '' : 's'}` };
    case 'type':
      return { path: at, message: `expected ${Array.isArray(p.type) ? p.type.join(' or ') : String(p.type)}, got ${typeName(e.data)}` };
    case 'enum':
      return {
        path: at,
        message: `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}, got ${show(e.data, secrets)}`,
      };
    case 'pattern':
      if (/^\/secrets\/\d+$/.test(at)) return { path: at, message: `must be the name of an environment variable (letters, digits and _, not starting with a digit; no \${...}), got ${show(e.data, secrets)}` };
      return { path: at, message: `must match ${String(p.pattern)}, got ${show(e.data, secrets)}` };
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return { path: at, message: `must be ${String(p.comparison)} ${String(p.limit)}, got ${show(e.data, secrets)}` };
    case 'minLength':
      return { path: at, message: p.limit === 1 ? 'must not be empty' : `must be at least ${String(p.limit)} characters` };
    default:
      return { path: at, message: e.message ?? `fails ${e.keyword}` };
  }
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number' && !Number.isInteger(v)) return `number ${v}`;
  return typeof v;
}

/** A message with every secret from the environment replaced (a prefix, say, may quote one). */
function scrub(message: string, secrets: readonly string[]): string {
  for (const s of [...secrets].sort((a, b) => b.length - a.length)) if (s.length >= 4) message = message.split(s).join('[REDACTED]');
  return message;
}

/** Quotes a value for an error message, unless it carries a secret from the environment. */
function show(v: unknown, secrets: string[]): string {
  if (typeof v === 'string' && secrets.some((s) => v.includes(s))) return 'a value from the environment';
  return JSON.stringify(v);
}

// ---- semantic checks and defaults ----

function build(
  raw: RawConfig,
  file: string,
  env: NodeJS.ProcessEnv,
  checked: { clean: (p: string) => boolean; missing: Set<string>; unavailable: Map<string, string[]> },
  issues: ConfigIssue[],
): Config {
  const { clean, missing, unavailable } = checked;
  const issue = (p: string, message: string) => issues.push({ path: p, message });
  const dir = path.dirname(file);
  const separator = (clean('/namespace/separator') ? raw.namespace?.separator : undefined) ?? DEFAULTS.separator;
  const timeouts = {
    requestMs: raw.timeouts?.requestMs ?? DEFAULTS.requestMs,
    maxMs: raw.timeouts?.maxMs ?? DEFAULTS.maxMs,
    startupMs: raw.timeouts?.startupMs ?? DEFAULTS.startupMs,
    startupWaitMs: 0,
  };
  timeouts.startupWaitMs = raw.timeouts?.startupWaitMs ?? Math.min(DEFAULTS.startupWaitMs, timeouts.startupMs);
  if (clean('/timeouts') && timeouts.startupWaitMs > timeouts.startupMs) {
    issue('/timeouts/startupWaitMs', `must be <= timeouts.startupMs (${timeouts.startupMs}), got ${timeouts.startupWaitMs}`);
  }
  if (clean('/timeouts') && timeouts.maxMs < timeouts.requestMs) {
    issue('/timeouts/maxMs', `must be >= timeouts.requestMs (${timeouts.requestMs}), got ${timeouts.maxMs}`);
  }

  // -- servers --
  const servers: ServerConfig[] = [];
  const prefixOwners = new Map<string, string[]>(); // non-empty prefix -> paths of enabled servers
  const rawServers = isObject(raw.mcpServers) ? raw.mcpServers : {};
  for (const [name, s] of Object.entries(rawServers)) {
    const at = jsonPointer(['mcpServers', name]);
    if (!clean(at)) continue;
    const ctx = { separator, requestMs: timeouts.requestMs, maxMs: timeouts.maxMs, dir, checkUrl: !missing.has(`${at}/url`), pinTools: raw.pinTools === true, missing: unavailable.get(at) };
    const server = buildServer(name, s, at, ctx, issue);
    if (!server) continue;
    servers.push(server);
    if (!server.disabled && server.prefix !== '') {
      const owners = prefixOwners.get(server.prefix) ?? [];
      owners.push(s.prefix === undefined ? at : `${at}/prefix`);
      prefixOwners.set(server.prefix, owners);
    }
  }
  for (const [prefix, owners] of prefixOwners) {
    if (owners.length < 2) continue;
    for (const p of owners) {
      const others = owners.filter((o) => o !== p).join(', ');
      issue(p, `prefix ${JSON.stringify(prefix)} is also used by ${others}; give one of them another "prefix"`);
    }
  }

  // -- surface and toolsets --
  const surface: SurfaceConfig = { ...DEFAULTS.surface, nativeSearchClients: [...DEFAULTS.surface.nativeSearchClients], alwaysVisible: [], ...(clean('/surface') ? raw.surface : {}) };
  if (clean('/surface') && surface.searchToolName === surface.callToolName) {
    issue('/surface/callToolName', `must differ from surface.searchToolName (both are ${JSON.stringify(surface.callToolName)})`);
  }
  const toolsets: Record<string, ToolsetConfig> = {};
  for (const [name, t] of Object.entries(isObject(raw.toolsets) ? raw.toolsets : {})) {
    if (!clean(jsonPointer(['toolsets', name]))) continue;
    // An object key JavaScript treats as its prototype: never a name a host could ask for safely.
    if (name === '__proto__') issue(jsonPointer(['toolsets', name]), 'this name cannot be a toolset\'s; choose another');
    else toolsets[name] = { tools: t.tools, ...(t.surface !== undefined && { surface: t.surface }) };
  }

  // -- listen and tokens --
  const oidcAsked = isObject(raw.listen?.auth?.oidc);
  const tokens: ClientToken[] = [];
  const tokenOwners = new Map<string, string>(); // token value -> path of its first user
  arrayOf(raw.listen?.auth?.tokens).forEach((t, i) => {
    const at = `/listen/auth/tokens/${i}`;
    if (!clean(at)) return;
    const token = env[t.tokenEnv];
    if (token === undefined || token === '') {
      issue(`${at}/tokenEnv`, `environment variable ${t.tokenEnv} is ${token === undefined ? 'not set' : 'empty'}`);
      return;
    }
    // The token identifies the client, so two clients must not share one.
    const first = tokenOwners.get(token);
    if (first !== undefined) issue(`${at}/tokenEnv`, `same token value as ${first}`);
    else tokenOwners.set(token, `${at}/tokenEnv`);
    if (t.client === ANONYMOUS_CLIENT || t.client === NO_CLIENT) {
      const what = t.client === ANONYMOUS_CLIENT ? 'sessions without a token' : 'no host session (an upstream request nobody could take)';
      issue(`${at}/client`, `"${t.client}" is the name of ${what}; give this client another name`);
      return;
    }
    // `oidc:<value>` is an unmapped OIDC host, and `oidc` their settings: a token named so would
    // share them (or be taken over by a JWT whose claim says its name).
    if (t.client.startsWith(`${OIDC_CLIENT}:`) || (t.client === OIDC_CLIENT && oidcAsked)) {
      issue(`${at}/client`, `"${OIDC_CLIENT}" and names beginning "${OIDC_CLIENT}:" are for hosts signed in through listen.auth.oidc; give this client another name`);
      return;
    }
    if (t.toolset !== undefined && !Object.hasOwn(toolsets, t.toolset)) {
      issue(`${at}/toolset`, unknownToolset(t.toolset, toolsets));
      return;
    }
    tokens.push({ client: t.client, tokenEnv: t.tokenEnv, token, admin: t.admin === true, ...(t.toolset !== undefined && { toolset: t.toolset }) });
  });
  // A client name in a policy or a rate limit must name a client that can exist.
  const tokenClients = new Set(arrayOf(raw.listen?.auth?.tokens).map((t) => t?.client));
  const clients = new Set([ANONYMOUS_CLIENT, ...tokenClients, ...(oidcAsked ? [OIDC_CLIENT] : [])]);
  // (Only when the token list itself is sound: a broken one is reported once, there.)
  const knownClient = (p: string, name: string): void => {
    const oidc = oidcAsked ? `, "${OIDC_CLIENT}" for hosts signed in through listen.auth.oidc whose claim is not mapped` : '';
    if (clean('/listen') && !clients.has(name)) issue(p, `no client named ${JSON.stringify(name)}: clients are the names in listen.auth.tokens${oidc}, and "${ANONYMOUS_CLIENT}" for sessions without a token`);
  };
  const oidc = clean('/listen/auth/oidc') ? oidcSettings(raw.listen?.auth?.oidc, tokenClients, issue) : undefined;
  for (const name of Object.keys(isObject(raw.policy?.clients) ? raw.policy!.clients! : {})) {
    if (clean(jsonPointer(['policy', 'clients', name]))) knownClient(jsonPointer(['policy', 'clients', name]), name);
  }
  const port = raw.listen?.port ?? DEFAULTS.port;
  const adminPort = raw.listen?.adminPort;
  if (clean('/listen') && adminPort !== undefined && adminPort !== 0 && adminPort === port) {
    issue('/listen/adminPort', `must differ from listen.port (${port})`);
  }
  if (clean('/listen') && raw.listen?.adminHost !== undefined && !adminPort) {
    issue('/listen/adminHost', 'applies only when listen.adminPort is set (without it the operator routes are on the main listener, at listen.host)');
  }

  // -- rate limits: a plain (non-glob) server or client name must exist --
  const rateLimits: RateLimitRule[] = [];
  arrayOf(raw.rateLimits).forEach((r, i) => {
    if (!clean(`/rateLimits/${i}`)) return;
    const server = r.server ?? '*';
    const client = r.client ?? '*';
    if (isObject(raw.mcpServers) && !isGlob(server) && !Object.hasOwn(rawServers, server)) {
      issue(`/rateLimits/${i}/server`, `no server named ${JSON.stringify(server)} in mcpServers`);
    }
    if (!isGlob(client)) knownClient(`/rateLimits/${i}/client`, client);
    rateLimits.push({
      client,
      server,
      tool: r.tool ?? '*',
      perMinute: r.perMinute,
      burst: r.burst ?? Math.ceil(r.perMinute),
      per: r.per ?? ['client', 'server', 'tool'],
    });
  });

  // -- audit and metrics: keys that only mean something beside another one --
  const auditArguments = raw.audit?.arguments ?? 'none';
  if (clean('/audit') && raw.audit?.redact !== undefined && auditArguments !== 'full') {
    issue('/audit/redact', `applies only when audit.arguments is "full" (it is ${JSON.stringify(auditArguments)})`);
  }
  if (clean('/audit') && raw.audit !== undefined && raw.audit.path === undefined && (raw.audit.arguments !== undefined || raw.audit.redact !== undefined)) {
    issue('/audit/path', 'is required: without it there is no audit log for the other audit keys to configure');
  }
  if (clean('/metrics') && raw.metrics?.toolLabelLimit !== undefined && raw.metrics.toolLabel !== true) {
    issue('/metrics/toolLabelLimit', 'applies only when metrics.toolLabel is true');
  }

  const { store, cluster } = sharedState(raw, env, clean, issue);
  const telemetry = clean('/telemetry') ? telemetrySettings(raw, env, issue) : undefined;

  const auditPath = raw.audit?.path;
  return {
    path: file,
    servers,
    namespace: { separator, maxNameLength: raw.namespace?.maxNameLength ?? DEFAULTS.maxNameLength },
    listen: {
      host: raw.listen?.host ?? DEFAULTS.host,
      port,
      allowedOrigins: raw.listen?.allowedOrigins ?? [],
      auth: { tokens, ...(oidc && { oidc }) },
      ...(adminPort !== undefined ? { adminPort } : {}),
      adminHost: raw.listen?.adminHost ?? DEFAULTS.adminHost,
    },
    policy: {
      ...itemLists(raw.policy?.tools, raw.policy?.prompts, raw.policy?.resources),
      clients: Object.fromEntries(Object.entries(raw.policy?.clients ?? {}).map(([k, v]) => [k, itemLists(v, v?.prompts, v?.resources)])),
    },
    surface,
    toolsets,
    rateLimits,
    audit: {
      path: typeof auditPath === 'string' ? path.resolve(dir, auditPath) : undefined,
      arguments: auditArguments,
      redact: raw.audit?.redact ?? [],
    },
    metrics: {
      toolLabel: raw.metrics?.toolLabel ?? false,
      toolLabelLimit: raw.metrics?.toolLabelLimit ?? DEFAULTS.toolLabelLimit,
    },
    telemetry,
    timeouts,
    limits: {
      maxMessageBytes: raw.limits?.maxMessageBytes ?? DEFAULTS.maxMessageBytes,
      maxInFlightPerSession: raw.limits?.maxInFlightPerSession ?? DEFAULTS.maxInFlightPerSession,
      maxSessions: raw.limits?.maxSessions ?? DEFAULTS.maxSessions,
      maxSessionsPerClient: raw.limits?.maxSessionsPerClient ?? DEFAULTS.maxSessionsPerClient,
      maxSessionUpstreams: raw.limits?.maxSessionUpstreams ?? DEFAULTS.maxSessionUpstreams,
      maxRateLimitKeys: raw.limits?.maxRateLimitKeys ?? DEFAULTS.maxRateLimitKeys,
    },
    logLevel: raw.logLevel,
    store,
    cluster,
    secrets: [],
  };
}

/**
 * `telemetry`: traces are on with `telemetry.otlp`, or with OTEL_TRACES_EXPORTER=otlp alone (the
 * SDK's own switch); OTEL_TRACES_EXPORTER=none turns them off whatever the file says. A key
 * that would do nothing (sampleRatio with traces off) is refused, as are headers that would
 * cross a network in clear.
 */
function telemetrySettings(raw: RawConfig, env: NodeJS.ProcessEnv, issue: (p: string, m: string) => void): TelemetryConfig | undefined {
  const t = raw.telemetry;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  const on = exporter !== 'none' && (t?.otlp !== undefined || exporter === 'otlp');
  if (t?.sampleRatio !== undefined && t.otlp === undefined && exporter !== 'otlp') {
    issue('/telemetry/sampleRatio', 'applies only when traces are on: add telemetry.otlp (or set OTEL_TRACES_EXPORTER=otlp)');
  }
  const endpoint = t?.otlp?.endpoint;
  const headers = t?.otlp?.headers ?? {};
  if (endpoint !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(endpoint);
    } catch {
      issue('/telemetry/otlp/endpoint', `must be an http:// or https:// URL, got ${JSON.stringify(endpoint)}`);
    }
    if (url && url.protocol !== 'http:' && url.protocol !== 'https:') issue('/telemetry/otlp/endpoint', `must be an http:// or https:// URL, got ${JSON.stringify(url.protocol)}`);
    else if (url && url.protocol === 'http:' && Object.keys(headers).length > 0 && !plainHttpAllowed(url)) {
      issue('/telemetry/otlp/headers', 'would be sent in clear to a collector that is not on this machine: use an https:// endpoint');
    }
  }
  if (!on) return undefined;
  return { endpoint, headers, sampleRatio: t?.sampleRatio ?? 1 };
}

/** `listen.auth.oidc` with its defaults; URLs and client names checked (the schema checked the shapes). */
function oidcSettings(
  raw: NonNullable<NonNullable<RawConfig['listen']>['auth']>['oidc'],
  tokenClients: ReadonlySet<string>,
  issue: (path: string, message: string) => void,
): OidcSettings | undefined {
  if (!raw) return undefined;
  const at = '/listen/auth/oidc';
  // Keys are fetched from these URLs: over plain http a network attacker could hand in their own.
  const checkUrl = (p: string, value: string, what: string): void => {
    let u: URL;
    try {
      u = new URL(value);
    } catch {
      return issue(p, `is not a URL: ${JSON.stringify(value)}`);
    }
    if (u.protocol !== 'https:' && !(u.protocol === 'http:' && plainHttpAllowed(u))) {
      issue(p, `must be an https:// URL (plain http only on a loopback address): the ${what} decides which keys sign hosts' tokens`);
    } else if (u.search || u.hash || u.username || u.password) {
      issue(p, 'must have no query, fragment or credentials');
    }
  };
  checkUrl(`${at}/issuer`, raw.issuer, 'issuer');
  if (raw.jwksUrl !== undefined) checkUrl(`${at}/jwksUrl`, raw.jwksUrl, 'JWKS');
  const clients: Record<string, string> = {};
  for (const [value, client] of Object.entries(raw.clients ?? {})) {
    if (value === '__proto__') {
      issue(jsonPointer(['listen', 'auth', 'oidc', 'clients', value]), 'this claim value cannot be mapped (JavaScript treats it as an object\'s prototype)');
    } else if (!tokenClients.has(client)) {
      issue(jsonPointer(['listen', 'auth', 'oidc', 'clients', value]), `no client named ${JSON.stringify(client)} in listen.auth.tokens: a claim value maps to a configured client (unmapped ones are "${OIDC_CLIENT}:<value>" anyway)`);
    } else {
      clients[value] = client;
    }
  }
  return {
    issuer: raw.issuer,
    audience: Array.isArray(raw.audience) ? raw.audience : [raw.audience],
    ...(raw.jwksUrl !== undefined && { jwksUrl: raw.jwksUrl }),
    clientClaim: raw.clientClaim ?? 'sub',
    clients,
    algorithms: raw.algorithms ?? [...OIDC_ALGORITHMS],
  };
}

/** The shortest secret accepted for store.secretEnv and cluster.secretEnv (e.g. `openssl rand -hex 32` gives 64). */
const MIN_SECRET_CHARS = 32;

/** `store` and `cluster`: the schema checked the shapes; here, what it cannot (URLs, variables). */
function sharedState(
  raw: RawConfig,
  env: NodeJS.ProcessEnv,
  clean: (p: string) => boolean,
  issue: (path: string, message: string) => void,
): { store: StoreConfig | undefined; cluster: ClusterConfig | undefined } {
  const secretFrom = (at: string, name: string): string | undefined => {
    const v = env[name];
    if (v === undefined || v === '') issue(at, `environment variable ${name} is ${v === undefined ? 'not set' : 'empty'}`);
    else if (v.length < MIN_SECRET_CHARS) issue(at, `environment variable ${name} holds ${v.length} characters; use at least ${MIN_SECRET_CHARS} (e.g. openssl rand -hex 32)`);
    else return v;
    return undefined;
  };
  let store: StoreConfig | undefined;
  const rs = raw.store;
  if (rs && clean('/store') && rs.redis?.url !== undefined) {
    const url = rs.redis.url;
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch {
      // The URL may hold a password: never echoed.
      issue('/store/redis/url', 'is not a URL (redis://host:port/db or rediss:// for TLS)');
    }
    if (parsed && parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') issue('/store/redis/url', `must start with redis:// or rediss:// (TLS), not ${parsed.protocol}//`);
    else if (parsed && !parsed.hostname) issue('/store/redis/url', 'names no host');
    else if (parsed && parsed.pathname.length > 1 && !/^\/\d{1,2}$/.test(parsed.pathname)) issue('/store/redis/url', 'the path must be a database number (/0 to /15)');
    const secret = rs.secretEnv === undefined ? undefined : secretFrom('/store/secretEnv', rs.secretEnv);
    store = {
      redis: { url, keyPrefix: rs.redis.keyPrefix ?? 'mcpmux:' },
      onError: rs.onError ?? 'closed',
      ...(rs.secretEnv !== undefined && { secretEnv: rs.secretEnv }),
      ...(secret !== undefined && { secret }),
    };
  }
  let cluster: ClusterConfig | undefined;
  const rc = raw.cluster;
  if (rc && clean('/cluster') && rc.advertiseUrl !== undefined && rc.secretEnv !== undefined) {
    if (!rs) issue('/cluster', 'needs store: the daemons of a cluster share their state, and find each other, in Redis');
    let advertiseUrl = rc.advertiseUrl;
    try {
      const u = new URL(rc.advertiseUrl);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') issue('/cluster/advertiseUrl', `must be an http:// or https:// URL, not ${u.protocol}//`);
      else if ((u.pathname !== '/' && u.pathname !== '') || u.search || u.hash || u.username || u.password) issue('/cluster/advertiseUrl', 'must be the base URL of the main listener only (scheme, host and port), with no path, query or credentials');
      advertiseUrl = u.origin;
    } catch {
      issue('/cluster/advertiseUrl', `is not a URL: ${JSON.stringify(rc.advertiseUrl)}`);
    }
    const secret = secretFrom('/cluster/secretEnv', rc.secretEnv);
    cluster = { advertiseUrl, secretEnv: rc.secretEnv, secret: secret ?? '', drainMs: rc.drainMs ?? 10_000 };
  }
  return { store, cluster };
}

interface ServerContext {
  separator: string; requestMs: number; maxMs: number; dir: string; checkUrl: boolean; pinTools: boolean;
  /** Variables the entry uses that the environment lacks. */
  missing: string[] | undefined;
}

function buildServer(
  name: string,
  s: RawServer,
  at: string,
  ctx: ServerContext,
  issue: (p: string, message: string) => void,
): ServerConfig | undefined {
  const prefix = s.prefix ?? name;
  if (prefix.includes(ctx.separator)) {
    // A public name is split at the first separator to find its server.
    issue(s.prefix === undefined ? at : `${at}/prefix`,
      `prefix ${JSON.stringify(prefix)} contains the separator ${JSON.stringify(ctx.separator)}` +
        (s.prefix === undefined ? '; set "prefix" to a name without it' : ''));
  }
  const timeoutMs = s.timeoutMs ?? ctx.requestMs;
  // (a defaulted timeoutMs is covered by the requestMs <= maxMs check)
  if (s.timeoutMs !== undefined && timeoutMs > ctx.maxMs) issue(`${at}/timeoutMs`, `must be <= timeouts.maxMs (${ctx.maxMs}), got ${timeoutMs}`);

  // Disabled in the file: not started, whatever it would need.
  const unavailable = s.disabled !== true && ctx.missing ? { missing: ctx.missing, reason: missingReason(ctx.missing) } : undefined;
  const common = {
    name,
    prefix,
    disabled: s.disabled === true || unavailable !== undefined,
    ...(unavailable && { unavailable }),
    pinTools: s.pinTools ?? ctx.pinTools,
    era: s.era ?? 'auto',
    sharing: s.sharing ?? 'shared',
    logs: s.logs ?? 'related',
    timeoutMs,
    tools: globList(s.tools),
    prompts: globList(s.prompts),
    resources: { ...globList(s.resources), namespace: s.resources?.namespace ?? 'prefix' },
    roots: s.roots?.map((r) => ({ ...r })),
    restart: {
      maxRetries: s.restart?.maxRetries ?? DEFAULTS.restartMaxRetries,
      backoffMs: s.restart?.backoffMs ?? DEFAULTS.restartBackoffMs,
    },
  };

  const declared = declaredTransport(s, at, issue);
  if ((s.command === undefined) === (s.url === undefined)) {
    issue(at, s.command === undefined ? 'needs "command" (local process) or "url" (remote server)' : 'has both "command" and "url"; use one');
    return undefined;
  }

  if (s.command !== undefined) {
    if (s.headers !== undefined) issue(`${at}/headers`, '"headers" applies to url servers, not to "command" servers');
    if (s.oauth !== undefined) issue(`${at}/oauth`, '"oauth" applies to url servers, not to "command" servers');
    if (declared !== undefined && declared !== 'stdio') {
      issue(`${at}/${s.type !== undefined ? 'type' : 'transport'}`, `is ${JSON.stringify(declared)} but the server has a "command" (stdio)`);
    }
    return {
      ...common,
      transport: 'stdio',
      command: s.command,
      args: s.args ?? [],
      env: s.env ?? {},
      inheritEnv: s.inheritEnv ?? false,
      cwd: s.cwd === undefined ? undefined : path.resolve(ctx.dir, s.cwd),
    };
  }

  for (const key of ['args', 'env', 'cwd', 'inheritEnv'] as const) {
    if (s[key] !== undefined) issue(`${at}/${key}`, `"${key}" applies to "command" servers, not to url servers`);
  }
  const url = s.url!;
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    if (ctx.checkUrl) issue(`${at}/url`, 'is not a valid URL');
  }
  let transport: 'http' | 'sse' | 'ws' = 'http';
  if (parsed) {
    const isWs = parsed.protocol === 'ws:' || parsed.protocol === 'wss:';
    const isHttp = parsed.protocol === 'http:' || parsed.protocol === 'https:';
    if (!isWs && !isHttp) {
      issue(`${at}/url`, `unsupported scheme ${JSON.stringify(parsed.protocol)}; use http(s):// or ws(s)://`);
    } else if (isWs) {
      transport = 'ws';
    } else if (declared === 'http' || declared === 'sse') {
      transport = declared; // an explicit type wins over the /sse path heuristic
    } else {
      transport = /\/sse\/?$/.test(parsed.pathname) ? 'sse' : 'http';
    }
    if (declared !== undefined && declared !== transport && (isWs || isHttp)) {
      issue(`${at}/${s.type !== undefined ? 'type' : 'transport'}`,
        `is ${JSON.stringify(declared)} but the url ${isWs ? 'is a WebSocket (ws:// or wss://) URL' : 'is an http(s):// URL'}`);
    }
  }
  const headers = s.headers ?? {};
  if (s.oauth !== undefined) {
    if (transport !== 'http') issue(`${at}/oauth`, `applies to Streamable HTTP servers only, not to ${transport} ones`);
    if (Object.keys(headers).some((h) => h.toLowerCase() === 'authorization')) issue(`${at}/oauth`, 'cannot be combined with an Authorization header: the login provides it');
    if (s.oauth.clientSecret !== undefined && s.oauth.clientId === undefined) issue(`${at}/oauth/clientSecret`, 'applies only with oauth.clientId (a registered client)');
    if (parsed?.protocol === 'http:' && !plainHttpAllowed(parsed)) {
      issue(`${at}/url`, 'must be https:// for a server behind OAuth (tokens would cross the network in clear); plain http is for loopback servers only');
    }
    const grant = s.oauth.grant ?? 'authorization_code';
    // Grants with no person and no browser: mcpmux gets its tokens itself.
    const machine = grant !== 'authorization_code';
    if (grant === 'client_credentials' && (s.oauth.clientId === undefined || (s.oauth.clientSecret === undefined && s.oauth.privateKey === undefined))) {
      issue(`${at}/oauth/grant`, 'client_credentials needs oauth.clientId and oauth.clientSecret or oauth.privateKey');
    }
    if ((grant === 'token_exchange' || grant === 'jwt_bearer') && s.oauth.clientId === undefined) issue(`${at}/oauth/grant`, `${grant} needs oauth.clientId (mcpmux's client at the server's authorization server)`);
    if (grant !== 'client_credentials' && s.oauth.privateKey !== undefined) issue(`${at}/oauth/privateKey`, 'applies only with oauth.grant "client_credentials"');
    if (s.oauth.signingAlgorithm !== undefined && s.oauth.privateKey === undefined) issue(`${at}/oauth/signingAlgorithm`, 'applies only with oauth.privateKey');
    if (machine && s.oauth.redirectPort !== undefined) issue(`${at}/oauth/redirectPort`, 'applies only to the authorization_code grant (a browser login)');
    // client_credentials is the daemon's own identity: one token, whoever calls. (The grants
    // that act for the host are per client already: `perClient: true` only says so again;
    // jwt_bearer with a fixed idp.idToken refuses it in checkGrantSettings.)
    if (grant === 'client_credentials' && s.oauth.perClient === true) issue(`${at}/oauth/perClient`, 'applies to logins made for a client (mcpmux login NAME --client C), not to the client_credentials grant: its token is the daemon\'s own');
    for (const key of ['interactive', 'interactiveWaitMs'] as const) {
      if (machine && s.oauth[key] !== undefined) issue(`${at}/oauth/${key}`, 'applies only to the authorization_code grant (a browser login)');
    }
    if (s.oauth.clientMetadataUrl !== undefined) {
      if (machine || s.oauth.clientId !== undefined) issue(`${at}/oauth/clientMetadataUrl`, 'is a client id of its own: not with oauth.clientId or a grant without a browser login');
      else if (!/^https:\/\//.test(s.oauth.clientMetadataUrl)) issue(`${at}/oauth/clientMetadataUrl`, 'must be an https:// URL');
    }
    checkGrantSettings(s.oauth, grant, `${at}/oauth`, ctx.checkUrl, issue);
  }
  return { ...common, transport, url, headers, ...(s.oauth !== undefined && { oauth: s.oauth }) };
}

/**
 * The settings of token_exchange and jwt_bearer: each only with its grant, the IdP complete,
 * endpoints that carry tokens over https (plain http on loopback only), no `perClient: false`
 * with a grant that acts for the host (its token is the host's identity: one per client), and no
 * `perClient: true` with a fixed `idp.idToken` (one identity for all: a connection and a stored
 * token per client would only copy it).
 */
function checkGrantSettings(o: OAuthSettings, grant: NonNullable<OAuthSettings['grant']>, at: string, checkUrl: boolean, issue: (p: string, m: string) => void): void {
  for (const key of ['audience', 'resource', 'subjectTokenType', 'tokenEndpoint'] as const) {
    if (o[key] !== undefined && grant !== 'token_exchange') issue(`${at}/${key}`, 'applies only with oauth.grant "token_exchange"');
  }
  if (o.idp !== undefined && grant !== 'jwt_bearer') issue(`${at}/idp`, 'applies only with oauth.grant "jwt_bearer"');
  // The host's JWT (whose audience is mcpmux: it could be replayed here) goes only where the
  // admin says: an upstream's resource metadata naming "its" authorization server must not
  // decide whom every signed-in person hands it to.
  if (grant === 'token_exchange' && o.tokenEndpoint === undefined) {
    issue(`${at}/tokenEndpoint`, "token_exchange needs oauth.tokenEndpoint: the host's JWT is sent only to a token endpoint the config names, never to one the upstream's metadata points at");
  }
  if (grant === 'jwt_bearer' && o.idp === undefined) issue(`${at}/grant`, 'jwt_bearer needs oauth.idp (issuer, clientId; tokenEndpoint, clientSecret and idToken as needed): the identity provider that issues the ID-JAG');
  const actsForHost = grant === 'token_exchange' || (grant === 'jwt_bearer' && o.idp !== undefined && o.idp.idToken === undefined);
  if (actsForHost && (o as { perClient?: unknown }).perClient === false) {
    issue(`${at}/perClient`, `cannot be false with ${grant === 'token_exchange' ? 'the token_exchange grant' : 'jwt_bearer without idp.idToken'}: the token is the host's identity, one per host client`);
  }
  if (grant === 'jwt_bearer' && o.idp?.idToken !== undefined && o.perClient === true) {
    issue(`${at}/perClient`, 'applies to identities per client, not to jwt_bearer with a fixed idp.idToken: that ID token is the identity, the same for every client (leave out idp.idToken to use each host\'s OIDC JWT)');
  }
  if (!checkUrl) return;
  const tokenUrl = (where: string, v: string | undefined): void => {
    if (v === undefined) return;
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      return issue(where, 'is not a valid URL');
    }
    if (u.protocol !== 'https:' && !(u.protocol === 'http:' && plainHttpAllowed(u))) issue(where, 'must be https:// (tokens cross it); plain http is for loopback only');
  };
  tokenUrl(`${at}/tokenEndpoint`, o.tokenEndpoint);
  if (o.resource !== undefined) {
    try {
      new URL(o.resource);
    } catch {
      issue(`${at}/resource`, 'must be an absolute URI (RFC 8707), e.g. the server\'s URL');
    }
  }
  tokenUrl(`${at}/idp/issuer`, o.idp?.issuer);
  tokenUrl(`${at}/idp/tokenEndpoint`, o.idp?.tokenEndpoint);
}

/** `type` / `transport` with the desktop hosts' aliases folded; both given must agree. */
function declaredTransport(s: RawServer, at: string, issue: (p: string, m: string) => void): TransportKind | undefined {
  const norm = (t: string | undefined) =>
    t === undefined ? undefined : t === 'streamable-http' || t === 'streamableHttp' ? 'http' : (t as TransportKind);
  const type = norm(s.type);
  const transport = norm(s.transport);
  if (type !== undefined && transport !== undefined && type !== transport) {
    issue(`${at}/transport`, `is ${JSON.stringify(s.transport)} but "type" is ${JSON.stringify(s.type)}`);
  }
  return type ?? transport;
}

/** The array if it is one (the schema reported it otherwise). */
function arrayOf<T>(v: T[] | undefined): T[] {
  return Array.isArray(v) ? v : [];
}

function globList(raw: RawGlobList | undefined): GlobList {
  return { allow: raw?.allow ?? ['*'], deny: raw?.deny ?? [] };
}

function itemLists(tools: RawGlobList | undefined, prompts: RawGlobList | undefined, resources: RawGlobList | undefined): ItemLists {
  return { tools: globList(tools), prompts: globList(prompts), resources: globList(resources) };
}

function isGlob(s: string): boolean {
  return /[*?]/.test(s);
}

/**
 * What loggers and the audit log scrub: the secret values from the environment (secrecy.ts);
 * every header value; a stdio server's `env` values whose key names a secret (the same rule as
 * for variables, `"secrets"` included) or that look like tokens; secret-looking arguments
 * written as they are (secret-args.ts); OAuth client secrets and keys; every client token.
 */
function collectSecrets(config: Config, fromEnv: string[], named: ReadonlySet<string>): string[] {
  const all = new Set(fromEnv);
  for (const s of config.servers) {
    if (s.transport === 'stdio') {
      for (const [k, v] of Object.entries(s.env)) if (secretVariable(k, named) || tokenLike(v)) all.add(v);
      for (const v of secretArgs(s.args)) all.add(v);
    } else {
      for (const v of Object.values(s.headers)) all.add(v);
      for (const v of urlSecrets(s.url)) all.add(v);
      for (const v of [s.oauth?.clientSecret, s.oauth?.privateKey, s.oauth?.idp?.clientSecret, s.oauth?.idp?.idToken]) if (v) all.add(v);
    }
  }
  for (const t of config.listen.auth.tokens) all.add(t.token);
  // The store's URL may carry a password; the shared keys are secrets through and through.
  if (config.store) for (const v of [...urlSecrets(config.store.redis.url), config.store.secret]) if (v) all.add(v);
  if (config.cluster) all.add(config.cluster.secret);
  // The collector's headers carry its API keys.
  for (const v of Object.values(config.telemetry?.headers ?? {})) all.add(v);
  all.delete('');
  return [...all];
}

/** Loopback hosts, the only ones an OAuth server or authorization server may be reached at over plain http (tokens must not cross a network in clear). */
export function plainHttpAllowed(url: URL): boolean {
  return ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
}
