// Reloading the config of a running mcpmux without dropping anyone: on SIGHUP (and so on
// `systemctl reload`), and when the file changes on disk. The new file is validated first; an
// invalid one is refused with every problem and its JSON path, and the running config stays.
// A valid one is diffed against the running one (config/diff.ts) and applied by the caller.

import path from 'node:path';
import { inForce, planReload, planIsEmpty, type ReloadPlan } from '../config/diff.js';
import { loadConfig } from '../config/load.js';
import { readText, watchFile } from '../files.js';
import { ConfigError, type Config } from '../config/types.js';
import { publishConfigReload, type ConfigReloadEvent } from '../observe/events.js';
import type { Logger } from '../observe/logger.js';

/** Editors save in bursts (truncate, write, rename): one reload after the file is quiet this long. */
const WATCH_DEBOUNCE_MS = 250;

export type ReloadTrigger = ConfigReloadEvent['trigger'];

/** What `/status` shows of the last reload. */
export interface ReloadRecord {
  at: string;
  trigger: ReloadTrigger;
  result: 'applied' | 'refused';
  error?: string;
  added?: string[];
  removed?: string[];
  restarted?: string[];
  updated?: string[];
  needsRestart?: string[];
}

export interface ReloaderOptions {
  file: string;
  log: Logger;
  current: () => Config;
  /**
   * Applies a valid new config. Throws (a message for the log) to refuse it before anything
   * changed, e.g. when the new audit file cannot be opened.
   */
  apply: (next: Config, plan: ReloadPlan) => Promise<void>;
}

export class Reloader {
  last: ReloadRecord | undefined;
  private running: Promise<void> | undefined;
  private again: ReloadTrigger | undefined;
  private unwatch: (() => void) | undefined;
  /** The file's text when last loaded: a save that changes nothing is no reason to reload. */
  private loadedText: string | undefined;
  private readonly onHup = (): void => void this.reload('signal');

  constructor(private readonly opts: ReloaderOptions) {
    this.loadedText = readText(opts.file);
  }

  /** Reloads on SIGHUP and when the file changes; stop() undoes both. */
  start(): void {
    process.on('SIGHUP', this.onHup);
    const dir = path.dirname(this.opts.file);
    try {
      this.unwatch = watchFile(
        this.opts.file,
        WATCH_DEBOUNCE_MS,
        (text) => {
          // Saved unchanged: nothing to do.
          if (text !== this.loadedText) void this.reload('file');
        },
        (err) => this.opts.log.warn({ err: err.message, dir }, 'config watch failed; reload with SIGHUP'),
      );
    } catch (err) {
      this.opts.log.warn({ err: (err as Error).message, dir }, 'cannot watch the config folder; reload with SIGHUP');
    }
  }

  stop(): void {
    process.off('SIGHUP', this.onHup);
    this.unwatch?.();
  }

  /**
   * One reload at a time; one asked for while another runs follows it (with the newest file).
   * A file event does not replace a signal's or an HTTP caller's reload waiting its turn: a file
   * reload of an unchanged text does nothing, and the caller would take an earlier run's record
   * (`last`) for its own.
   */
  reload(trigger: ReloadTrigger): Promise<void> {
    if (this.running) {
      if (trigger !== 'file' || this.again === undefined || this.again === 'file') this.again = trigger;
      return this.running;
    }
    const run = async (): Promise<void> => {
      let next: ReloadTrigger | undefined = trigger;
      while (next) {
        this.again = undefined;
        await this.once(next);
        next = this.again;
      }
    };
    this.running = run().finally(() => (this.running = undefined));
    return this.running;
  }

  private async once(trigger: ReloadTrigger): Promise<void> {
    const { file, log } = this.opts;
    const text = readText(file);
    // A file event queued behind a signal's reload of the same text: already done.
    if (trigger === 'file' && text === this.loadedText) return;
    let next: Config;
    try {
      next = await loadConfig(file);
    } catch (err) {
      return this.refuse(trigger, err instanceof ConfigError ? err.message : `cannot read ${file}: ${(err as Error).message}`, text);
    }
    const current = this.opts.current();
    const plan = planReload(current, next);
    try {
      await this.opts.apply(inForce(current, next), plan);
    } catch (err) {
      return this.refuse(trigger, `invalid config ${file}:\n  ${(err as Error).message}`, text);
    }
    this.loadedText = text;
    const names = {
      added: plan.added.map((s) => s.name),
      removed: plan.removed,
      restarted: plan.restarted.map((s) => s.name),
      updated: plan.updated.map((u) => u.server.name),
      needsRestart: plan.needsRestart,
    };
    this.last = { at: new Date().toISOString(), trigger, result: 'applied', ...names };
    publishConfigReload({ result: 'applied', trigger, file, ...names });
    log.info({ trigger, file, ...names, unchanged: planIsEmpty(plan) }, 'config reloaded');
    if (plan.needsRestart.length > 0) {
      log.warn({ settings: plan.needsRestart }, 'these settings changed but apply only when mcpmux restarts; the old values stay in force until then');
    }
  }

  private refuse(trigger: ReloadTrigger, error: string, text: string | undefined): void {
    const { file, log } = this.opts;
    // Not this text again until it changes: a watcher would otherwise refuse it on every event.
    this.loadedText = text;
    this.last = { at: new Date().toISOString(), trigger, result: 'refused', error };
    publishConfigReload({ result: 'refused', trigger, file, error, added: [], removed: [], restarted: [], updated: [], needsRestart: [] });
    log.error({ trigger, file, error }, 'config reload refused; the running config stays');
  }
}
