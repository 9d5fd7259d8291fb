// Ids that are unique only per server — task ids, URL-elicitation ids — are shown to hosts as
// `<server>:<id>` (server names cannot contain `:`), and mapped back on the way in.

import type { Params } from '../protocol/mcp.js';
import { splitServer } from './naming.js';

export const RELATED_TASK = 'io.modelcontextprotocol/related-task';

export function wrapId(server: string, id: string): string {
  return server + ':' + id;
}

export function unwrapId(wrapped: string): { server: string; rest: string } | undefined {
  return splitServer(wrapped, ':');
}

/** Rewrites `_meta["io.modelcontextprotocol/related-task"].taskId` in place, if present. */
export function mapRelatedTask(obj: unknown, map: (id: string) => string): void {
  const meta = (obj as Params | null | undefined)?._meta as Params | undefined;
  const rel = meta?.[RELATED_TASK] as Params | undefined;
  if (rel && typeof rel.taskId === 'string') rel.taskId = map(rel.taskId);
}

/** Rewrites `task.taskId` (CreateTaskResult) or a top-level `taskId` (Task, tasks/get result). */
export function mapTaskResult(result: Params, map: (id: string) => string): void {
  const task = result.task as Params | undefined;
  if (task && typeof task.taskId === 'string') task.taskId = map(task.taskId);
  if (typeof result.taskId === 'string') result.taskId = map(result.taskId);
  mapRelatedTask(result, map);
}
