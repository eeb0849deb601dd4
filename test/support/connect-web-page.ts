// Browser code: bundled by esbuild for the page of test/http/browser-connect-web.test.ts
// (never imported by jest). IdentityService calls over @connectrpc/connect-web, as a web
// app on another origin makes them, with each outcome as plain data the test can assert.
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { IdentityService } from "../../gen/svc/v1/identity_pb.js";

/** The protocol a call travels over. */
export type Door = "connect" | "grpc-web";

/** A call's outcome: what it returned, or the Connect code (its name) and message of its error. */
export type Outcome = { ok: true; identityId: string; token: string } | { ok: false; code: string; message: string };

export interface Target {
  door: Door;
  /** The platform's base address. */
  baseUrl: string;
  /** The credential the page sends. */
  key: string;
}

function identityClient(target: Target) {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("Authorization", `Bearer ${target.key}`);
    return next(req);
  };
  const options = { baseUrl: target.baseUrl, interceptors: [bearer] };
  return createClient(IdentityService, target.door === "connect" ? createConnectTransport(options) : createGrpcWebTransport(options));
}

async function outcome(call: () => Promise<{ identityId: string; session?: { token: string } | undefined }>): Promise<Outcome> {
  try {
    const { identityId, session } = await call();
    return { ok: true, identityId, token: session?.token ?? "" };
  } catch (error) {
    const failure = ConnectError.from(error);
    return { ok: false, code: Code[failure.code], message: failure.rawMessage };
  }
}

export function registerPassword(target: Target, identifier: string, password: string): Promise<Outcome> {
  return outcome(() => identityClient(target).registerPassword({ identifier, password }));
}

export function loginPassword(target: Target, identifier: string, password: string): Promise<Outcome> {
  return outcome(() => identityClient(target).loginPassword({ identifier, password }));
}

/** A backend RPC (secret key only): no page may call it. */
export function generateMagicLink(target: Target, identifier: string): Promise<Outcome> {
  return outcome(async () => {
    await identityClient(target).generateMagicLink({ identifier });
    return { identityId: "" };
  });
}
