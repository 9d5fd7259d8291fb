// Tool pins kept in a state file (tool-pins.json in the state folder): what the mcpmux
// processes of one user on one machine share (a daemon, `mcpmux stdio`, and `mcpmux tools
// --approve`, which writes it while a daemon watches it). Without `store` in the config.

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { readText, watchFile, writePrivate } from '../files.js';
import type { PinsKeeper, PinStorage, ServerPins } from './pins.js';

const FILE_VERSION = 1;

interface StateFile {
  version: number;
  servers: Record<string, ServerPins>;
}

export class FilePins implements PinStorage {
  private state: StateFile = { version: FILE_VERSION, servers: {} };
  private saveTimer: NodeJS.Timeout | undefined;
  private unwatch: (() => void) | undefined;
  private lastWritten = '';

  constructor(
    private readonly file: string,
    private readonly keeper: PinsKeeper,
  ) {
    this.load();
  }

  get servers(): Readonly<Record<string, ServerPins>> {
    return this.state.servers;
  }

  record(server: string, tools: ServerPins): void {
    Object.assign((this.state.servers[server] ??= {}), tools);
    this.scheduleSave();
  }

  async approve(server: string, tools: ServerPins): Promise<void> {
    Object.assign((this.state.servers[server] ??= {}), tools);
    this.saveNow();
  }

  prune(server: string, listed: ReadonlySet<string>): void {
    const known = this.state.servers[server];
    let removed = false;
    for (const tool of Object.keys(known ?? {})) {
      if (listed.has(tool)) continue;
      delete known![tool];
      removed = true;
    }
    if (removed) this.scheduleSave();
  }

  drop(servers: readonly string[]): void {
    for (const server of servers) delete this.state.servers[server];
    this.saveNow();
  }

  async ready(): Promise<undefined> {
    return undefined;
  }

  isRead(): boolean {
    return true;
  }

  /** One process per state folder: its first use lasts its run. */
  sharedRecord(): boolean {
    return false;
  }

  refusal(): undefined {
    return undefined;
  }

  /** Re-reads the file when another process (`mcpmux tools --approve`) changes it. */
  watch(): void {
    const warn = (err: Error, what: string) => this.keeper.log.warn({ err: err.message, file: this.file }, what);
    try {
      mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
      this.unwatch = watchFile(
        this.file,
        100,
        (text) => {
          if (text === this.lastWritten) return;
          // Only approvals for servers this process pins change what hosts see; another
          // mcpmux recording its own servers' first use must not make every host re-list.
          this.keeper.changed(
            () => {
              const prior = this.state;
              this.load();
              this.keepPinned(prior);
            },
            { file: this.file },
            'tool pins changed on disk; lists rebuilt',
          );
        },
        (err) => warn(err, 'the tool pins watch failed; approvals apply on restart'),
      );
    } catch (err) {
      warn(err as Error, 'cannot watch the tool pins file; approvals apply on restart');
    }
  }

  /**
   * A server this process pins whose entry another process removed (it stopped pinning it):
   * its approvals stay, or its held tools would be trusted afresh. Written back.
   */
  private keepPinned(prior: StateFile): void {
    const back = [...this.keeper.pinned].filter((server) => !this.state.servers[server] && prior.servers[server]);
    if (back.length === 0) return;
    for (const server of back) this.state.servers[server] = prior.servers[server]!;
    this.keeper.log.warn({ file: this.file, servers: back }, 'the tool pins file lost servers this process pins; their approvals were written back');
    this.saveNow();
  }

  async close(): Promise<void> {
    this.unwatch?.();
    if (this.saveTimer) this.saveNow();
  }

  private load(): void {
    const text = readText(this.file);
    if (text === undefined) return;
    try {
      const doc = JSON.parse(text) as StateFile;
      if (doc && typeof doc === 'object' && doc.servers && typeof doc.servers === 'object') this.state = { version: FILE_VERSION, servers: doc.servers };
    } catch (err) {
      this.keeper.log.error({ file: this.file, err: (err as Error).message }, 'the tool pins file is not valid JSON; starting from nothing (it will be rewritten)');
    }
  }

  private scheduleSave(): void {
    this.saveTimer ??= setTimeout(() => this.saveNow(), 200);
    this.saveTimer.unref?.();
  }

  /** Atomically: a temp file beside it, then a rename; mode 0600. */
  private saveNow(): void {
    clearTimeout(this.saveTimer);
    this.saveTimer = undefined;
    const text = JSON.stringify(this.state, null, 2) + '\n';
    try {
      writePrivate(this.file, text);
      this.lastWritten = text;
    } catch (err) {
      this.keeper.log.error({ file: this.file, err: (err as Error).message }, 'cannot write the tool pins file');
    }
  }
}
