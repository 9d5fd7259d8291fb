// The daemon across its parts: several host sessions over Streamable HTTP in front of stdio and
// HTTP upstreams — connection sharing, exact routing of sampling per session, the host's
// credentials never reaching an upstream, and policy per client.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { isAlive, startDaemon, stopAllDaemons, type Daemon } from './helpers/daemon.js';
import { closeAll, fixture, looseSchema, readEvents, waitFor } from './helpers/harness.js';
import { startHttpFixture, type Fixture } from './helpers/http-fixture.js';

const clients: Client[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  await closeAll();
});
afterAll(stopAllDaemons);

/** An SDK host over Streamable HTTP, with an optional bearer token and capabilities. */
async function host(d: Daemon, opts: { token?: string; capabilities?: object; name?: string } = {}): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: opts.name ?? 'test-host', version: '0.0.0' }, { capabilities: opts.capabilities ?? {} });
  const headers: Record<string, string> = opts.token ? { authorization: `Bearer ${opts.token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(d.url), { requestInit: { headers } });
  clients.push(client);
  return { client, transport };
}

const textOf = (r: any): string => r.content[0].text;
const pidOf = async (c: Client, tool: string): Promise<number> => JSON.parse(textOf(await c.callTool({ name: tool }))).pid;

describe('daemon: sharing of stdio upstreams between HTTP sessions', () => {
  it('shared: two sessions reach the same upstream process', async () => {
    const d = await startDaemon({ mcpServers: { one: fixture({ name: 'one' }) } });
    const a = await host(d);
    const b = await host(d);
    await a.client.connect(a.transport);
    await b.client.connect(b.transport);
    expect(await pidOf(a.client, 'one__whoami')).toBe(await pidOf(b.client, 'one__whoami'));
  });

  it('session: two sessions reach two processes, and ending one session ends its process only', async () => {
    const d = await startDaemon({ mcpServers: { mine: { ...fixture({ name: 'mine' }), sharing: 'session' } } });
    const a = await host(d);
    const b = await host(d);
    await a.client.connect(a.transport);
    await b.client.connect(b.transport);
    const pidA = await pidOf(a.client, 'mine__whoami');
    const pidB = await pidOf(b.client, 'mine__whoami');
    expect(pidA).not.toBe(pidB);

    await a.transport.terminateSession(); // DELETE /mcp
    await waitFor(() => !isAlive(pidA), { timeoutMs: 10_000, what: `session A's upstream (pid ${pidA}) to exit` });
    expect(isAlive(pidB)).toBe(true);
    expect(await pidOf(b.client, 'mine__whoami')).toBe(pidB);
  });
});

describe('daemon: an HTTP upstream shared by two sessions', () => {
  let fx: Fixture;
  beforeAll(async () => {
    fx = await startHttpFixture({ name: 'web' });
  });
  afterAll(() => fx?.close());

  it('two sessions sampling at once each answer only their own sampling request', async () => {
    const d = await startDaemon({ mcpServers: { web: { url: `${fx.url}/mcp` } } });
    // Both handlers wait until both requests have arrived, so the two are truly in flight together.
    let arrived = 0;
    let release!: () => void;
    const both = new Promise<void>((r) => (release = r));
    const sampler = async (who: string) => {
      const h = await host(d, { capabilities: { sampling: {} }, name: who });
      h.client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
        if (++arrived === 2) release();
        await Promise.race([both, new Promise((_, rej) => setTimeout(() => rej(new Error('the other request never came')), 10_000))]);
        const asked = (req.params.messages[0]!.content as { text: string }).text;
        return { model: who, role: 'assistant' as const, content: { type: 'text' as const, text: `${who} answers "${asked}"` } };
      });
      await h.client.connect(h.transport);
      return h.client;
    };
    const [a, b] = await Promise.all([sampler('host-a'), sampler('host-b')]);
    const [ra, rb] = await Promise.all([
      a.callTool({ name: 'web__sample', arguments: { text: 'question from A' } }),
      b.callTool({ name: 'web__sample', arguments: { text: 'question from B' } }),
    ]);
    expect(JSON.parse(textOf(ra)).content.text).toBe('host-a answers "question from A"');
    expect(JSON.parse(textOf(rb)).content.text).toBe('host-b answers "question from B"');
  });

  it("the host's bearer token never reaches the upstream, while the config's header does", async () => {
    const HOST_TOKEN = 'host-token-6c1d9e0b77';
    const d = await startDaemon(
      {
        mcpServers: { web: { url: `${fx.url}/mcp`, headers: { 'X-Upstream-Key': 'cfg-key-41' } } },
        listen: { auth: { tokens: [{ client: 'ci', tokenEnv: 'MUX_TEST_TOKEN' }] } },
      },
      { MUX_TEST_TOKEN: HOST_TOKEN },
    );
    const h = await host(d, { token: HOST_TOKEN });
    await h.client.connect(h.transport);
    const marker = `marker-${Date.now()}`;
    await h.client.callTool({ name: 'web__echo', arguments: { marker } });

    const seen = await waitFor(
      () => {
        const reqs = readEvents(fx.events).filter((e: any) => e.type === 'http' && e.headers['x-upstream-key'] === 'cfg-key-41');
        return reqs.length > 0 && reqs;
      },
      { what: 'the fixture to record requests carrying the config header' },
    );
    for (const r of seen as any[]) expect(JSON.stringify(r.headers)).not.toContain(HOST_TOKEN);
    expect(JSON.stringify(readEvents(fx.events))).not.toContain(HOST_TOKEN);
  });
});

describe('daemon: tool policy per client (bearer tokens name the client)', () => {
  it('a client denied a tool neither sees nor calls it; another client does both', async () => {
    const d = await startDaemon(
      {
        mcpServers: { fx: fixture({ name: 'fx' }) },
        listen: {
          auth: {
            tokens: [
              { client: 'ci', tokenEnv: 'MUX_CI' },
              { client: 'dev', tokenEnv: 'MUX_DEV' },
            ],
          },
        },
        policy: { clients: { ci: { allow: ['*'], deny: ['*__echo'] } } },
      },
      { MUX_CI: 'ci-token-0123456789', MUX_DEV: 'dev-token-0123456789' },
    );
    const ci = await host(d, { token: 'ci-token-0123456789' });
    const dev = await host(d, { token: 'dev-token-0123456789' });
    await ci.client.connect(ci.transport);
    await dev.client.connect(dev.transport);

    const names = async (c: Client) => (await c.listTools()).tools.map((t) => t.name);
    expect(await names(ci.client)).not.toContain('fx__echo');
    expect(await names(dev.client)).toContain('fx__echo');
    await expect(ci.client.callTool({ name: 'fx__echo', arguments: {} })).rejects.toThrow(/fx__echo is denied by policy for client "ci"/);
    expect(textOf(await dev.client.callTool({ name: 'fx__echo', arguments: { x: 1 } }))).toContain('"x":1');
  });
});

describe('daemon: tasks belong to the session that created them', () => {
  it('another session can neither get nor list a task it did not create', async () => {
    const d = await startDaemon({ mcpServers: { tk: fixture({ name: 'tk', tasks: true }) } });
    const a = await host(d);
    const b = await host(d);
    await a.client.connect(a.transport);
    await b.client.connect(b.transport);
    const ask = (c: Client, method: string, params: object): Promise<any> => c.request({ method, params } as any, looseSchema);

    const created = await ask(a.client, 'tools/call', { name: 'tk__echo', arguments: { x: 1 }, task: { ttl: 60_000 } });
    const id: string = created.task.taskId;
    expect(id).toBe('tk:task-1');
    expect((await ask(a.client, 'tasks/get', { taskId: id })).taskId).toBe(id);
    expect((await ask(a.client, 'tasks/list', {})).tasks.map((t: any) => t.taskId)).toEqual([id]);

    await expect(ask(b.client, 'tasks/get', { taskId: id })).rejects.toThrow(/Unknown task: tk:task-1/);
    await expect(ask(b.client, 'tasks/result', { taskId: id })).rejects.toThrow(/Unknown task/);
    expect((await ask(b.client, 'tasks/list', {})).tasks).toEqual([]);
  });
});
