// Where mcpmux keeps what must outlive a run (tool pins, OAuth tokens): one folder, private to
// the user it runs as.

import os from 'node:os';
import path from 'node:path';

/** Where mcpmux keeps state: $MCPMUX_STATE_DIR, systemd's $STATE_DIRECTORY, $XDG_STATE_HOME/mcpmux, ~/.local/state/mcpmux. */
export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.MCPMUX_STATE_DIR) return env.MCPMUX_STATE_DIR;
  if (env.STATE_DIRECTORY) return env.STATE_DIRECTORY.split(':')[0]!;
  if (process.platform === 'win32') return path.join(env.LOCALAPPDATA ?? path.join(os.homedir(), 'AppData', 'Local'), 'mcpmux');
  return path.join(env.XDG_STATE_HOME ?? path.join(os.homedir(), '.local', 'state'), 'mcpmux');
}
