#!/usr/bin/env node
// Runs an MCP server package that comes with mcpmux (config.example.json's servers are its
// optionalDependencies), found the way Node finds modules from mcpmux's own folder:
//
//   "command": "node", "args": ["${MCPMUX_HOME}/bin/run-server.js", "@modelcontextprotocol/server-everything", "stdio"]
//
// A path into node_modules would not do: npm puts a package's dependencies in its own
// node_modules for a global install, but hoists them beside it for npx or a local install, and
// a config may live in any folder. The package's `bin` runs in this process, with the
// arguments after the package name, as if it had been started directly.

import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const [name, ...args] = process.argv.slice(2);
if (!name) {
  process.stderr.write('usage: node run-server.js <package> [arguments for the server...]\n');
  process.exit(2);
}

// Every node_modules folder Node would look in from here (bin/, then the package root and up);
// the package.json is looked up directly, since a package's `exports` may not list it.
const lookIn = createRequire(import.meta.url).resolve.paths(name) ?? [];
const dir = lookIn.map((d) => path.join(d, name)).find((d) => existsSync(path.join(d, 'package.json')));
if (!dir) {
  const home = path.dirname(fileURLToPath(new URL('.', import.meta.url)));
  process.stderr.write(
    `mcpmux: cannot find the server package ${name} from mcpmux's folder ${home}. ` +
      `The example config's servers are optional dependencies of mcpmux, which npm leaves out ` +
      `with --omit=optional or when one fails to install. Install it: \`npm install -g ${name}\` ` +
      `(beside a global mcpmux), or \`npm ci\` in a clone.\n`,
  );
  process.exit(127);
}

const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
const bins = typeof manifest.bin === 'string' ? [manifest.bin] : Object.values(manifest.bin ?? {});
if (bins.length !== 1) {
  process.stderr.write(`mcpmux: ${name} has ${bins.length} commands in its package.json "bin"; run it with its path instead\n`);
  process.exit(2);
}

const entry = path.join(dir, bins[0]);
// The server reads its arguments (and may check that it is the main module) from process.argv.
process.argv = [process.argv[0], entry, ...args];
await import(pathToFileURL(entry).href);
