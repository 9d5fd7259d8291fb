// Tool policy on public (namespaced) names: a global allow/deny list and one per client, deny
// winning. A denied tool is absent from lists and calling it fails with an error that says so.

import type { Config } from '../config/types.js';
import { RpcError } from '../jsonrpc/message.js';
import { MuxError } from '../protocol/mcp.js';
import type { Interceptor } from '../router/router.js';
import { compileAllowDeny, type Matcher } from './glob.js';

export class ToolPolicy {
  private readonly global: Matcher;
  private readonly perClient = new Map<string, Matcher>();
  /** True when no rule can deny anything, so lists need no filtering at all. */
  readonly open: boolean;

  constructor(policy: Config['policy']) {
    this.global = compileAllowDeny(policy.tools);
    for (const [client, list] of Object.entries(policy.clients)) this.perClient.set(client, compileAllowDeny(list));
    this.open = policy.tools.allow.includes('*') && policy.tools.deny.length === 0 && this.perClient.size === 0;
  }

  allows(client: string | undefined, publicName: string): boolean {
    if (this.open) return true;
    if (!this.global(publicName)) return false;
    const own = client === undefined ? undefined : this.perClient.get(client);
    return own ? own(publicName) : true;
  }

  /** Wraps the router's forward step: a denied tools/call never reaches the upstream. */
  interceptor(): Interceptor {
    return (next) => (call) => {
      if (call.method === 'tools/call' && call.publicName !== undefined && !this.allows(call.session.client, call.publicName)) {
        const who = call.session.client ? ` for client "${call.session.client}"` : '';
        return Promise.reject(new RpcError(MuxError.PolicyDenied, `Tool ${call.publicName} is denied by policy${who}`));
      }
      return next(call);
    };
  }
}
