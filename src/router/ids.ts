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

function relatedTask(obj: unknown): Params | undefined {
  const meta = (obj as Params | null | undefined)?._meta as Params | undefined;
  const rel = meta?.[RELATED_TASK] as Params | undefined;
  return rel && typeof rel.taskId === 'string' ? rel : undefined;
}

/** Upstream -> host: `_meta["io.modelcontextprotocol/related-task"].taskId` becomes `<server>:<id>`, in place. */
export function wrapRelatedTask(obj: unknown, server: string): void {
  const rel = relatedTask(obj);
  if (rel) rel.taskId = wrapId(server, rel.taskId as string);
}

/** Host -> upstream: the related-task id loses its `<server>:`, in place. */
export function unwrapRelatedTask(obj: unknown): void {
  const rel = relatedTask(obj);
  if (rel) rel.taskId = unwrapId(rel.taskId as string)?.rest ?? rel.taskId;
}

/** Upstream -> host: `task.taskId` (CreateTaskResult) or a top-level `taskId` (a Task), and the related task. */
export function wrapTaskResult(result: Params, server: string): void {
  const task = result.task as Params | undefined;
  if (task && typeof task.taskId === 'string') task.taskId = wrapId(server, task.taskId);
  if (typeof result.taskId === 'string') result.taskId = wrapId(server, result.taskId);
  wrapRelatedTask(result, server);
}
