import type { DescMethod } from "@bufbuild/protobuf";
import { cors } from "@connectrpc/connect";
import type { OutgoingHttpHeaders } from "node:http";
import type { Procedure } from "./procedures.js";

export interface BrowserCorsDeps {
  procedures: ReadonlyMap<string, Procedure>;
  /** Whether a web page may call the RPC: its declared auth rule accepts the publishable key (auth.ts). */
  callableFromBrowser(method: DescMethod): boolean;
  /** The REST routes at a path: each one's HTTP method and the RPCs it may call. */
  restRoutesAt(pathname: string): readonly { method: string; rpcs: readonly DescMethod[] }[];
  /** Documents any page may read (the JWKS): path -> methods. */
  documents: ReadonlyMap<string, readonly string[]>;
}

export interface BrowserCors {
  /** The methods a page on another origin may use at the path (`POST`), or undefined where CORS is never answered. */
  methodsAt(pathname: string): string | undefined;
  /** A granted preflight's headers, for the methods methodsAt gave. */
  preflightHeaders(methods: string): OutgoingHttpHeaders;
  /** The headers of every other answer at such a path (a success or an error). */
  readonly answerHeaders: { readonly "access-control-allow-origin": string; readonly "access-control-expose-headers": string };
}

const unique = (names: readonly string[]) => [...new Set(names.map((name) => name.toLowerCase()))].join(", ");

/**
 * Request headers a page may send: those the Connect and gRPC-Web protocols
 * send (`cors.allowedHeaders` of @connectrpc/connect: Content-Type,
 * Connect-Protocol-Version, Connect-Timeout-Ms, Grpc-Timeout, X-Grpc-Web,
 * X-User-Agent, ...), the credential, a compressed REST body's coding and a request id.
 */
const allowedHeaders = unique([...cors.allowedHeaders, "Authorization", "Content-Encoding", "X-Request-Id"]);

/**
 * Response headers a page may read beyond the CORS-safelisted ones: the gRPC
 * status of a gRPC-Web answer (`cors.exposedHeaders`: Grpc-Status,
 * Grpc-Message, Grpc-Status-Details-Bin), and what the platform's errors say
 * in headers: when to retry (a 429), which scheme to use (a 401), the request id.
 */
const exposedHeaders = unique([...cors.exposedHeaders, "Retry-After", "WWW-Authenticate", "X-Request-Id"]);

/**
 * CORS for browser clients (Fetch standard, "CORS protocol"; docs/security.md
 * "The platform API"): the paths a page on another origin may call with the
 * publishable key, derived from the RPCs' declared auth rules, never listed by
 * hand: every RPC that accepts the publishable key (even beside a secret key:
 * a browser can only hold the publishable one), every REST path in front of
 * one, and the documents that are public (the JWKS). Nothing that takes only
 * an API key, a secret key, a gateway key or the dashboard's cookie answers
 * CORS, so no other site's page can read what they return.
 *
 * The origin is always `*`: the answer never depends on who asks (the
 * credential is the publishable key, not an origin), and `*` is what makes
 * the browser refuse any request that carries cookies or HTTP
 * authentication (Fetch, "CORS check": `*` never matches a credentialed
 * request); Access-Control-Allow-Credentials is never sent.
 */
export function createBrowserCors(deps: BrowserCorsDeps): BrowserCors {
  const rpcPaths = new Set<string>();
  for (const [path, procedure] of deps.procedures) if (deps.callableFromBrowser(procedure.method)) rpcPaths.add(path);
  const preflights = new Map<string, OutgoingHttpHeaders>();
  return {
    methodsAt(pathname) {
      if (rpcPaths.has(pathname)) return "POST";
      const document = deps.documents.get(pathname);
      if (document) return document.join(", ");
      const methods = deps
        .restRoutesAt(pathname)
        .filter((route) => route.rpcs.some((rpc) => deps.callableFromBrowser(rpc)))
        .map((route) => route.method);
      return methods.length > 0 ? [...new Set(methods)].join(", ") : undefined;
    },
    preflightHeaders(methods) {
      let headers = preflights.get(methods);
      if (!headers) {
        headers = Object.freeze({
          "access-control-allow-origin": "*",
          "access-control-allow-methods": methods,
          "access-control-allow-headers": allowedHeaders,
          // Browsers cap it (Chromium at 2 hours); 10 minutes spares a preflight per call without pinning a change for long.
          "access-control-max-age": "600",
          "content-length": "0",
        });
        preflights.set(methods, headers);
      }
      return headers;
    },
    answerHeaders: { "access-control-allow-origin": "*", "access-control-expose-headers": exposedHeaders },
  };
}
