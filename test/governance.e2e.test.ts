// Governance through the real binary (mcpmux stdio, fixture upstreams): rate limits and their
// two answers, and policy on prompts and resources at every level. What a limit or a policy
// refuses never reaches the upstream; the fixtures' event files prove it.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from './helpers/daemon.js';
import { closeAll, fixture, readEvents, startRawMux, tempFile, writeConfig, type RawPeer } from './helpers/harness.js';

afterEach(closeAll);
afterAll(stopAllDaemons);

const call = (peer: RawPeer, name: string, args: object = {}) => peer.request('tools/call', { name, arguments: args });
const calls = (events: string, method: string) => readEvents(events).filter((e) => e.type === 'request' && e.method === method);

/**
 * Waits as long as mcpmux said to (`retryAfterMs`): a bucket refills on a clock, so this is a
 * wait for a time mcpmux announced, not a guess.
 */
const after = (ms: number) => new Promise((r) => setTimeout(r, ms + 50));

describe('rate limits', () => {
  it('burst 3: calls 1-3 pass, the 4th is a tool error with _meta.retryAfterMs, another server is unaffected, and after the refill it passes', async () => {
    const events = tempFile('alpha.jsonl');
    const peer = startRawMux(
      await writeConfig({
        mcpServers: { alpha: fixture({ name: 'alpha', events }), beta: fixture({ name: 'beta' }) },
        // 30 a minute: a token every 2 s.
        rateLimits: [{ server: 'alpha', perMinute: 30, burst: 3 }],
      }),
    );
    await peer.initialize();
    // The burst passes. A busy machine may take 2 s over these calls and earn a token back, so
    // calls go on until one is limited (bounded) rather than assuming the fourth is.
    const passed: number[] = [];
    let limited: any;
    for (let i = 1; i <= 20 && !limited; i++) {
      const r = await call(peer, 'alpha__echo', { i });
      if (r.result?.isError) limited = r;
      else {
        expect(r.result.structuredContent).toEqual({ i });
        passed.push(i);
      }
    }
    expect(passed.length).toBeGreaterThanOrEqual(3);
    expect(limited, 'a call was limited').toBeDefined();
    expect(limited.error).toBeUndefined();
    expect(limited.result.isError).toBe(true);
    const wait = limited.result._meta.retryAfterMs;
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(2000);
    expect(limited.result.content[0].text).toMatch(/^Rate limit reached for alpha__echo: at most 3 at once and 30 per minute\. Try again in \d+\.\d s\.$/);

    expect((await call(peer, 'beta__echo', { other: true })).result.structuredContent).toEqual({ other: true });
    await after(wait);
    expect((await call(peer, 'alpha__echo', { i: 100 })).result.structuredContent).toEqual({ i: 100 });
    // The limited call never reached alpha: it saw the ones that passed, then the one after the refill.
    expect(calls(events, 'tools/call').map((e) => e.params.arguments.i)).toEqual([...passed, 100]);
  });

  it('a limited request other than tools/call is the JSON-RPC error -31005 with data.retryAfterMs', async () => {
    const events = tempFile('alpha.jsonl');
    const peer = startRawMux(
      await writeConfig({
        mcpServers: { alpha: fixture({ name: 'alpha', events }) },
        rateLimits: [{ server: 'alpha', perMinute: 1, burst: 1 }],
      }),
    );
    await peer.initialize();
    expect((await peer.request('prompts/get', { name: 'alpha__prompt_0', arguments: { topic: 't' } })).result.messages).toBeDefined();
    const refused = await peer.request('prompts/get', { name: 'alpha__prompt_0', arguments: { topic: 't' } });
    expect(refused.error.code).toBe(-31005);
    expect(refused.error.message).toMatch(/^Rate limit reached for alpha__prompt_0: at most 1 at once and 1 per minute\. Try again in \d+\.\d s\.$/);
    expect(refused.error.data.retryAfterMs).toBeGreaterThan(50_000);
    // resources/read counts too (another key: its own bucket), and lists never do.
    expect((await peer.request('resources/read', { uri: 'alpha+fixture://alpha/res/0' })).result).toBeDefined();
    expect((await peer.request('resources/read', { uri: 'alpha+fixture://alpha/res/0' })).error.code).toBe(-31005);
    for (let i = 0; i < 3; i++) expect((await peer.request('tools/list')).result.tools.length).toBeGreaterThan(0);
    expect(calls(events, 'prompts/get')).toHaveLength(1);
    expect(calls(events, 'resources/read')).toHaveLength(1);
  });

  it('a rule for one tool leaves the other tools alone; per: ["server"] shares one bucket across tools', async () => {
    const peer = startRawMux(
      await writeConfig({
        mcpServers: { alpha: fixture({ name: 'alpha' }), beta: fixture({ name: 'beta' }) },
        rateLimits: [
          { server: 'alpha', tool: 'tool_*', perMinute: 1, burst: 1 },
          { server: 'beta', perMinute: 1, burst: 2, per: ['server'] },
        ],
      }),
    );
    await peer.initialize();
    expect((await call(peer, 'alpha__tool_0')).result.isError).toBeUndefined();
    expect((await call(peer, 'alpha__tool_1')).result.isError).toBeUndefined(); // its own bucket
    expect((await call(peer, 'alpha__tool_0')).result.isError).toBe(true);
    for (let i = 0; i < 3; i++) expect((await call(peer, 'alpha__echo')).result.isError).toBeUndefined();

    expect((await call(peer, 'beta__echo')).result.isError).toBeUndefined();
    expect((await call(peer, 'beta__tool_0')).result.isError).toBeUndefined();
    expect((await call(peer, 'beta__whoami')).result.isError).toBe(true);
  });
});

describe('rate limits per client (mcpmux serve, bearer tokens)', () => {
  it('each token client has its own bucket; a rule naming one client limits only it', async () => {
    const tokens = { MUX_A: 'token-of-client-a-123', MUX_B: 'token-of-client-b-456', MUX_C: 'token-of-client-c-789' };
    const d = await startDaemon(
      {
        mcpServers: { fx: fixture({ name: 'fx' }) },
        listen: { auth: { tokens: [{ client: 'a', tokenEnv: 'MUX_A' }, { client: 'b', tokenEnv: 'MUX_B' }, { client: 'c', tokenEnv: 'MUX_C' }] } },
        // Every client: 2 at once (a bucket each). Client c: 1 at once as well (the stricter rule wins).
        rateLimits: [
          { server: 'fx', perMinute: 2, burst: 2 },
          { client: 'c', server: '*', perMinute: 1, burst: 1 },
        ],
      },
      tokens,
    );
    const as = async (token: string) => {
      const c = new Client({ name: 'h', version: '0' }, { capabilities: {} });
      await c.connect(new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      return c;
    };
    const [a, b, c] = [await as(tokens.MUX_A), await as(tokens.MUX_B), await as(tokens.MUX_C)];
    const limited = async (client: Client) => (await client.callTool({ name: 'fx__echo', arguments: {} })).isError === true;
    expect([await limited(a), await limited(a), await limited(a)]).toEqual([false, false, true]);
    // a used its bucket up; b's is its own.
    expect([await limited(b), await limited(b), await limited(b)]).toEqual([false, false, true]);
    expect([await limited(c), await limited(c)]).toEqual([false, true]);
    const metrics = await (await fetch(`${d.base}/metrics`)).text();
    for (const [client, n] of [['a', 1], ['b', 1], ['c', 1]] as const) {
      expect(metrics).toContain(`mcpmux_rate_limited_total{server="fx",client="${client}"} ${n}`);
    }
    await Promise.all([a.close(), b.close(), c.close()]);
    await d.stop();
  }, 60_000);
});

describe('policy on prompts and resources', () => {
  const config = (events: string) => ({
    mcpServers: {
      alpha: fixture({ name: 'alpha', prompts: 3, resources: 3, templates: 2, events }),
      beta: {
        ...fixture({ name: 'beta', prompts: 3, resources: 3, templates: 1, events }),
        // A server's own lists match its own names and URIs.
        prompts: { deny: ['prompt_0'] },
        resources: { deny: ['fixture://beta/res/0'] },
      },
    },
    policy: {
      // Global lists match what hosts see: public names, namespaced URIs and templates.
      prompts: { deny: ['alpha__prompt_1'] },
      resources: { deny: ['alpha+fixture://alpha/res/1', 'alpha+fixture://alpha/tpl/0/*'] },
      // Sessions without a token (stdio) are the client "anonymous".
      clients: { anonymous: { prompts: { deny: ['*__prompt_2'] } } },
    },
  });

  it('denied prompts, resources and templates are absent from every list', async () => {
    const peer = startRawMux(await writeConfig(config(tempFile('ev.jsonl'))));
    await peer.initialize();
    const prompts = (await peer.request('prompts/list')).result.prompts.map((p: any) => p.name);
    expect(prompts).toEqual(['alpha__prompt_0', 'beta__prompt_1']);
    const resources = (await peer.request('resources/list')).result.resources.map((r: any) => r.uri);
    expect(resources).toEqual(['alpha+fixture://alpha/res/0', 'alpha+fixture://alpha/res/2', 'beta+fixture://beta/res/1', 'beta+fixture://beta/res/2']);
    const templates = (await peer.request('resources/templates/list')).result.resourceTemplates.map((t: any) => t.uriTemplate);
    expect(templates).toEqual(['alpha+fixture://alpha/tpl/1/{id}', 'beta+fixture://beta/tpl/0/{id}']);
  });

  it('using a denied prompt or resource fails with the policy error, and the upstream never hears of it', async () => {
    const events = tempFile('ev.jsonl');
    const peer = startRawMux(await writeConfig(config(events)));
    await peer.initialize();
    const refused = async (method: string, params: object, message: RegExp) => {
      const r = await peer.request(method, params);
      expect(r.error, `${method} ${JSON.stringify(params)}`).toMatchObject({ code: -31002 });
      expect(r.error.message).toMatch(message);
    };
    const topic = { topic: 't' };
    await refused('prompts/get', { name: 'alpha__prompt_1', arguments: topic }, /^Prompt alpha__prompt_1 is denied by policy$/);
    await refused('prompts/get', { name: 'beta__prompt_0', arguments: topic }, /^Prompt beta__prompt_0 is denied by policy$/);
    await refused('prompts/get', { name: 'alpha__prompt_2', arguments: topic }, /^Prompt alpha__prompt_2 is denied by policy for client "anonymous"$/);
    await refused('resources/read', { uri: 'alpha+fixture://alpha/res/1' }, /^Resource alpha\+fixture:\/\/alpha\/res\/1 is denied by policy$/);
    await refused('resources/read', { uri: 'beta+fixture://beta/res/0' }, /denied by policy/);
    await refused('resources/read', { uri: 'alpha+fixture://alpha/tpl/0/42' }, /denied by policy/);
    await refused('resources/subscribe', { uri: 'alpha+fixture://alpha/res/1' }, /denied by policy/);
    await refused('completion/complete', { ref: { type: 'ref/prompt', name: 'alpha__prompt_1' }, argument: { name: 'topic', value: '' } }, /denied by policy/);
    await refused('completion/complete', { ref: { type: 'ref/resource', uri: 'alpha+fixture://alpha/tpl/0/{id}' }, argument: { name: 'id', value: '' } }, /denied by policy/);

    // What is allowed still works, and is all the upstreams saw.
    expect((await peer.request('prompts/get', { name: 'alpha__prompt_0', arguments: topic })).result.messages).toBeDefined();
    expect((await peer.request('resources/read', { uri: 'alpha+fixture://alpha/res/0' })).result.contents[0].uri).toBe('alpha+fixture://alpha/res/0');
    expect((await peer.request('completion/complete', { ref: { type: 'ref/prompt', name: 'alpha__prompt_0' }, argument: { name: 'topic', value: '' } })).result.completion.values).toEqual(['a', 'b']);
    const seen = readEvents(events).filter((e) => e.type === 'request' && /^(prompts\/get|resources\/|completion)/.test(e.method));
    expect(seen.map((e) => [e.server, e.method])).toEqual([
      ['alpha', 'prompts/get'],
      ['alpha', 'resources/read'],
      ['alpha', 'completion/complete'],
    ]);
  });

  it('a tool a server hides is refused as policy, not as unknown', async () => {
    const peer = startRawMux(await writeConfig({ mcpServers: { alpha: { ...fixture({ name: 'alpha' }), tools: { deny: ['echo'] } } } }));
    await peer.initialize();
    const r = await call(peer, 'alpha__echo');
    expect(r.error).toMatchObject({ code: -31002, message: 'Tool alpha__echo is denied by policy' });
    expect((await call(peer, 'alpha__nope')).error).toMatchObject({ code: -32602, message: 'Unknown tool: alpha__nope' });
  });
});
