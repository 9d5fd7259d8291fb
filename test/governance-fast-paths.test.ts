// The shortcuts of issue 23 on governance's per-call path, on the real classes: a policy matcher
// that keeps its answers per name, and a rate limiter that keeps each rule's answer for the last
// caller, must give exactly the answers of matching afresh, whatever the order of callers.

import { describe, expect, it } from 'vitest';
import type { RateLimitRule } from '../src/config/types.js';
import { compileAllowDeny, remembered } from '../src/governance/glob.js';
import { Policy } from '../src/governance/policy.js';
import { RateLimiter } from '../src/governance/rate-limit.js';

describe('policy answers kept per name', () => {
  it('agree with the lists for every name, past the cache bound and for names too long to keep', () => {
    const list = { allow: ['gh__*', 'fs__read?'], deny: Array.from({ length: 30 }, (_, i) => `gh__admin${i}_*`) };
    const fresh = compileAllowDeny(list);
    const kept = remembered(fresh);
    const names = Array.from({ length: 10_000 }, (_, i) => [`gh__tool${i}`, `gh__admin${i % 40}_x`, `fs__read${i % 10}`, `other${i}`][i % 4]!);
    names.push(`gh__${'x'.repeat(1000)}`, `gh__admin3_${'y'.repeat(1000)}`);
    // Twice each, in a different order the second time: kept answers must equal fresh ones.
    for (const n of [...names, ...names.reverse()]) expect(kept(n)).toBe(fresh(n));
  });

  it('a reload (a new Policy) answers by the new lists, not by what the old one kept', () => {
    const servers = [{ name: 'gh', tools: { allow: ['*'], deny: [] }, prompts: { allow: ['*'], deny: [] }, resources: { allow: ['*'], deny: [] } }] as never;
    const lists = (deny: string[]) => ({ tools: { allow: ['*'], deny }, prompts: { allow: ['*'], deny: [] }, resources: { allow: ['*'], deny: [] }, clients: {} });
    const before = new Policy({ policy: lists(['gh__x*']), servers } as never);
    expect(before.clientAllows('c', 'tools', 'gh__xy')).toBe(false);
    expect(before.clientAllows('c', 'tools', 'gh__ab')).toBe(true);
    const after = new Policy({ policy: lists(['gh__a*']), servers } as never);
    expect(after.clientAllows('c', 'tools', 'gh__xy')).toBe(true);
    expect(after.clientAllows('c', 'tools', 'gh__ab')).toBe(false);
  });
});

describe('rate-limit answers kept per rule for the last caller', () => {
  const rule = (r: Partial<RateLimitRule>): RateLimitRule => ({ client: '*', server: '*', tool: '*', perMinute: 1, burst: 1, per: ['client', 'server', 'tool'], ...r });

  it('alternating callers, servers, tools and methods each get their own rule answers and buckets', () => {
    const rl = new RateLimiter([rule({ server: 'a' }), rule({ tool: 't1', per: ['client'] })], 1000, () => 1000);
    // Rule 0 (server a, per client/server/tool): one token per bucket. Rule 1 (tool t1, per client): one token per client.
    expect(rl.take('c1', 'a', 'tools/call', 't2')).toBeUndefined(); // rule 0 only
    expect(rl.take('c1', 'b', 'tools/call', 't2')).toBeUndefined(); // no rule
    expect(rl.take('c1', 'a', 'tools/call', 't2')?.rule).toBe(0); // its bucket is empty
    expect(rl.take('c1', 'b', 'tools/call', 't1')).toBeUndefined(); // rule 1 only
    expect(rl.take('c2', 'b', 'tools/call', 't1')).toBeUndefined(); // rule 1, c2's own bucket
    expect(rl.take('c1', 'b', 'tools/call', 't1')?.rule).toBe(1);
    expect(rl.take('c1', 'b', 'prompts/get', undefined)).toBeUndefined(); // a tool glob counts tools/call only
    expect(rl.take('c1', 'a', 'prompts/get', undefined)).toBeUndefined(); // rule 0, the method's own bucket
    expect(rl.take('c1', 'a', 'resources/read', undefined)).toBeUndefined(); // and another method's
    expect(rl.take('c1', 'a', 'prompts/get', undefined)?.rule).toBe(0);
    expect(rl.size).toBe(5);
  });
});
