import type { ConfigDocument } from "../domain/config/config-document.js";

/**
 * Everything a gateway enforces, as one immutable value. The follower
 * (control-plane side of the gateway) builds a new GatewayState for every
 * change it learns of; the data plane compiles it once (route table, plugin
 * instances) and swaps it in atomically, so each request is served wholly by
 * one state and requests in flight finish on the state they started with.
 */
export interface GatewayState {
  /** The organisation this gateway serves. */
  readonly organizationId: string;
  /** Session tokens: the `iss` they must carry (the platform's PUBLIC_URL). */
  readonly issuer: string;
  /** Session tokens: the `aud` they must carry (the organisation id). */
  readonly audience: string;
  /** The configuration revision and its validated document. */
  readonly revision: number;
  readonly document: ConfigDocument;
  /** The platform's public signing keys (a JWKS, RFC 7517), for session-auth. */
  readonly jwks: { keys: readonly JsonWebKeyLike[] };
  /** Sessions revoked before they expire: session id (`sid`) -> expiry in epoch ms. */
  readonly revokedSessions: ReadonlyMap<string, number>;
  /** Live consumer keys for api-key-auth: hex SHA-256 of the key -> the consumer. */
  readonly consumers: ReadonlyMap<string, Consumer>;
  /**
   * Values of the secrets the configuration references, `<environment>/<name>` -> value.
   * Held in memory only: never written to the last-known-good cache file or logged.
   */
  readonly secrets: ReadonlyMap<string, string>;
}

export interface Consumer {
  readonly id: string;
  readonly name: string;
}

/** A public JWK as the JWKS serves it (EC P-256 for ES256 session tokens). */
export interface JsonWebKeyLike {
  readonly kty: string;
  readonly kid?: string;
  readonly alg?: string;
  readonly crv?: string;
  readonly x?: string;
  readonly y?: string;
  readonly use?: string;
}
