// Who this daemon is among the daemons of a cluster (`cluster` in the config), and the keys it
// shares with them. The id is drawn at start and dies with the process: a daemon restarted at
// the same address is another daemon (the calls the old one parked are gone with it). The keys
// come from `cluster.secret` by HKDF, one per use, so that a token signed for one use (a
// requestState) is never valid as another (a forwarded request's stamp).

import { hkdfSync, randomBytes } from 'node:crypto';
import type { ClusterConfig } from '../config/types.js';

export interface ClusterIdentity {
  /** This daemon's id: random, 16 hex characters, new at every start. */
  readonly id: string;
  /** How the other daemons reach this one (origin, no trailing slash). */
  readonly advertiseUrl: string;
  /** Signs and checks requestState tokens: any daemon verifies one minted by another (session/parked.ts). */
  readonly stateKey: Buffer;
  /** Stamps and checks a request one daemon forwards to another (transport/http/cluster-forward.ts). */
  readonly forwardKey: Buffer;
}

const SALT = 'mcpmux cluster v1';

export function clusterIdentity(config: ClusterConfig): ClusterIdentity {
  const derive = (info: string): Buffer => Buffer.from(hkdfSync('sha256', config.secret, SALT, info, 32));
  return {
    id: randomBytes(8).toString('hex'),
    advertiseUrl: config.advertiseUrl,
    stateKey: derive('requestState'),
    forwardKey: derive('forwarded request'),
  };
}
