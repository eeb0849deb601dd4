import type { JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { IdentityService } from "../../gen/svc/v1/identity_pb.js";
import type { Caller, SignedIn } from "../domain/identity/identity.js";
import type { Passkeys } from "../domain/passkeys/passkeys.js";

type PasskeyMethod =
  | "beginPasskeyRegistration"
  | "finishPasskeyRegistration"
  | "beginPasskeyLogin"
  | "finishPasskeyLogin"
  | "beginAddPasskey"
  | "finishAddPasskey"
  | "removePasskey";

/** The passkey RPCs of svc.v1.IdentityService, spread into the service by createIdentityService. */
export type PasskeyRpcs = Pick<ServiceImpl<typeof IdentityService>, PasskeyMethod>;

/** What the identity service shares with the passkey RPCs. */
export interface PasskeyRpcParts {
  /** The passkeys domain (src/composition/passkeys.ts). */
  passkeys: Passkeys;
  /** The caller of an identity RPC as the auth interceptor established it. */
  callerOf(ctx: HandlerContext): Caller;
}

/** The options of @simplewebauthn/server as a google.protobuf.Struct (JSON without undefined members). */
function asStruct(options: object): JsonObject {
  return JSON.parse(JSON.stringify(options)) as JsonObject;
}

function session(result: SignedIn) {
  return { token: result.session.token, expiresAt: timestampFromDate(result.session.expiresAt) };
}

/** BeginPasskeyRegistration ... RemovePasskey: thin mappings onto src/domain/passkeys. */
export function createPasskeyRpcs(parts: PasskeyRpcParts): PasskeyRpcs {
  const { callerOf, passkeys } = parts;

  return {
    async beginPasskeyRegistration(req, ctx) {
      const begun = await passkeys.beginRegistration(callerOf(ctx), { identifier: req.identifier, displayName: req.displayName });
      return { ceremonyId: begun.ceremonyId, options: asStruct(begun.options) };
    },

    async finishPasskeyRegistration(req, ctx) {
      const registered = await passkeys.finishRegistration(callerOf(ctx), { ceremonyId: req.ceremonyId, credential: req.credential });
      return { identityId: registered.identityId, credentialId: registered.credentialId, session: session(registered) };
    },

    async beginPasskeyLogin(req, ctx) {
      const begun = await passkeys.beginLogin(callerOf(ctx), { identifier: req.identifier });
      return { ceremonyId: begun.ceremonyId, options: asStruct(begun.options) };
    },

    async finishPasskeyLogin(req, ctx) {
      const signedIn = await passkeys.finishLogin(callerOf(ctx), { ceremonyId: req.ceremonyId, credential: req.credential });
      return { identityId: signedIn.identityId, session: session(signedIn) };
    },

    async beginAddPasskey(req, ctx) {
      const begun = await passkeys.beginAddPasskey(callerOf(ctx), { identityId: req.identityId });
      return { ceremonyId: begun.ceremonyId, options: asStruct(begun.options) };
    },

    async finishAddPasskey(req, ctx) {
      return passkeys.finishAddPasskey(callerOf(ctx), { ceremonyId: req.ceremonyId, credential: req.credential, name: req.name });
    },

    async removePasskey(req, ctx) {
      await passkeys.removePasskey(callerOf(ctx), { identityId: req.identityId, credentialId: req.credentialId });
      return {};
    },
  };
}
