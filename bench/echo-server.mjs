#!/usr/bin/env node
// The benchmark's upstream: an MCP echo server built the way most servers are, with the official
// SDK's McpServer and zod input schemas. Plain JS, no build step.
//
//   node bench/echo-server.mjs                      stdio (newline-delimited JSON on stdin/stdout)
//   node bench/echo-server.mjs --tools 100          plus 100 dummy tools with realistic schemas
//   node bench/echo-server.mjs --http 0             Streamable HTTP at /mcp on 127.0.0.1 (0: any port)
//   node bench/echo-server.mjs --http 0 --sse       ... answering POSTs with SSE instead of JSON
//   node bench/echo-server.mjs --http 0 --max-body 16777216   request body limit (SDK default 4 MiB)
//
// Tool `echo {text}` answers `{content: [{type: "text", text}]}`. Dummy tools answer a short text.
// HTTP mode is stateful (one SDK transport + McpServer per Mcp-Session-Id, as in the SDK's own
// examples) and, unless --sse, uses `enableJsonResponse: true` (one JSON body per POST). It logs
// one JSON line `{"msg":"listening","url":"http://127.0.0.1:PORT/mcp"}` to stderr when ready.
// stdout carries only MCP in stdio mode; nothing is logged per message.

import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

function parseArgs(argv) {
  const o = { tools: 0, http: undefined, sse: false, maxBody: undefined, name: 'echo' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--tools') o.tools = int(next(), a);
    else if (a === '--http') o.http = int(next(), a);
    else if (a === '--sse') o.sse = true;
    else if (a === '--max-body') o.maxBody = int(next(), a);
    else if (a === '--name') o.name = next();
    else fail(`unknown option ${a}`);
  }
  return o;
}
function int(s, flag) {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0) fail(`${flag} needs a non-negative integer, got ${s}`);
  return n;
}
function fail(msg) {
  process.stderr.write(`echo-server: ${msg}\n`);
  process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));

// ---- dummy tools: varied, realistic names, descriptions and input schemas --------------------
const DOMAINS = [
  ['issue', 'issues in the project tracker'],
  ['file', 'files in the workspace'],
  ['calendar_event', 'events on the user calendar'],
  ['customer', 'customer records in the CRM'],
  ['invoice', 'invoices in the billing system'],
  ['deployment', 'deployments of the services'],
  ['metric', 'time series in the metrics store'],
  ['document', 'documents in the knowledge base'],
  ['ticket', 'support tickets'],
  ['pull_request', 'pull requests of the repository'],
];
const VERBS = [
  ['search', 'Search', 'matching a free-text query, newest first. Returns at most `limit` results with their ids, titles and a short excerpt. Use this before fetching a single item.'],
  ['get', 'Fetch one of the', 'by its id, with every field and the last 20 changes. Fails with a not-found error when the id does not exist or the caller cannot see it.'],
  ['create', 'Create one of the', 'from the given fields. Required fields must be present; unknown fields are rejected. Returns the new id and a link the user can open.'],
  ['update', 'Update one of the', 'Only the given fields change; pass null to clear a field. Concurrent edits are detected with the `etag` returned by the get tool.'],
  ['list', 'List', 'in pages of `pageSize`, optionally filtered by owner, status and a date range. Use the returned cursor to fetch the next page.'],
  ['delete', 'Delete one of the', 'This cannot be undone. Requires `confirm: true`; without it the tool only reports what would be deleted.'],
  ['summarize', 'Summarize', 'over a period: counts by status and owner, the busiest days and notable outliers, as a short markdown report.'],
  ['export', 'Export', 'matching a filter as CSV or JSON to a temporary download link valid for one hour.'],
  ['comment', 'Add a comment to one of the', 'The comment supports markdown and @mentions, which notify the mentioned users.'],
  ['assign', 'Assign one of the', 'to a user or a team, optionally with a due date and a note explaining why.'],
];

function dummyTool(i) {
  const [noun, plural] = DOMAINS[i % DOMAINS.length];
  const [verb, lead, tail] = VERBS[Math.floor(i / DOMAINS.length) % VERBS.length];
  const round = Math.floor(i / (DOMAINS.length * VERBS.length));
  const name = `${verb}_${noun}${round ? `_${round + 1}` : ''}`;
  const description = `${lead} ${plural} ${tail}`;
  const shape = {
    id: z.string().min(1).max(128).describe(`The ${noun.replace('_', ' ')} id, as returned by search or list.`),
    query: z.string().max(1000).optional().describe('Free-text query; supports quoted phrases, -exclusions and field:value filters.'),
    limit: z.number().int().min(1).max(100).default(20).describe('Maximum number of results to return (1-100).'),
    status: z.enum(['open', 'in_progress', 'blocked', 'done', 'archived']).optional().describe('Only items in this status.'),
    owner: z.string().email().optional().describe('Only items owned by this user (email address).'),
    since: z.string().datetime().optional().describe('Only items changed at or after this ISO 8601 timestamp.'),
    tags: z.array(z.string().max(64)).max(20).optional().describe('Only items carrying all of these tags.'),
    fields: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()])).optional().describe('Field values to set, keyed by field name.'),
    confirm: z.boolean().optional().describe('Must be true for destructive operations.'),
  };
  // Each tool takes a different, plausible subset of the parameters.
  const keys = Object.keys(shape);
  const pick = {};
  for (let k = 0; k < keys.length; k++) if (k === 0 || (i + k) % 3 !== 0) pick[keys[k]] = shape[keys[k]];
  return { name, description, shape: pick };
}

function buildServer() {
  const server = new McpServer({ name: opts.name, version: '1.0.0' }, { capabilities: { tools: {} } });
  server.registerTool(
    'echo',
    {
      description: 'Echo the given text back unchanged, as a single text content block.',
      inputSchema: { text: z.string().describe('The text to echo back.') },
      annotations: { readOnlyHint: true, idempotentHint: true },
    },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  for (let i = 0; i < opts.tools; i++) {
    const t = dummyTool(i);
    server.registerTool(t.name, { description: t.description, inputSchema: t.shape }, async (args) => ({
      content: [{ type: 'text', text: `${t.name}: ok (${Object.keys(args).length} arguments)` }],
    }));
  }
  return server;
}

if (opts.http === undefined) {
  const server = buildServer();
  await server.connect(new StdioServerTransport());
} else {
  const sessions = new Map(); // session id -> transport
  const http = createServer(async (req, res) => {
    try {
      const url = new URL(req.url ?? '/', 'http://localhost');
      if (url.pathname !== '/mcp') {
        res.writeHead(404).end();
        return;
      }
      const sid = req.headers['mcp-session-id'];
      if (typeof sid === 'string') {
        const t = sessions.get(sid);
        if (!t) {
          res.writeHead(404, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
          return;
        }
        await t.handleRequest(req, res);
        return;
      }
      if (req.method !== 'POST') {
        res.writeHead(400).end();
        return;
      }
      // A new session: the SDK's examples parse the body to check it is an initialize request.
      const body = await readBody(req, opts.maxBody ?? 4 * 1024 * 1024);
      if (body === undefined) {
        res.writeHead(413).end();
        return;
      }
      let msg;
      try {
        msg = JSON.parse(body);
      } catch {
        res.writeHead(400).end();
        return;
      }
      if (!isInitializeRequest(msg)) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'No valid session id' }, id: null }));
        return;
      }
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: !opts.sse,
        ...(opts.maxBody !== undefined && { maxRequestBodySize: opts.maxBody }),
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await buildServer().connect(transport);
      await transport.handleRequest(req, res, msg);
    } catch (err) {
      if (!res.headersSent) res.writeHead(500);
      res.end();
      process.stderr.write(`echo-server: ${err?.stack ?? err}\n`);
    }
  });
  http.keepAliveTimeout = 60_000;
  http.listen(opts.http, '127.0.0.1', () => {
    const { port } = http.address();
    process.stderr.write(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${port}/mcp`, mode: opts.sse ? 'sse' : 'json' }) + '\n');
  });
  const stop = () => {
    for (const t of sessions.values()) void t.close().catch(() => {});
    http.close();
    http.closeAllConnections();
    setTimeout(() => process.exit(0), 500).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

function readBody(req, max) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let n = 0;
    let over = false;
    req.on('data', (c) => {
      n += c.length;
      if (n > max) over = true;
      else chunks.push(c);
    });
    req.on('end', () => resolve(over ? undefined : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
